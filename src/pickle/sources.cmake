# Sources of the pickle layer.
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/globals.cpp
  ${CMAKE_CURRENT_LIST_DIR}/literal_eval.cpp
  ${CMAKE_CURRENT_LIST_DIR}/opcode_walk.cpp
  ${CMAKE_CURRENT_LIST_DIR}/opcodes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/profiles.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytext.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unpickler.cpp
)
