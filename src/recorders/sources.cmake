# Sources of the recorders layer: our own record formats.
target_sources(torchport_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/binary_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/msgpack_record.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorder.cpp
)
