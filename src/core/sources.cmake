# Sources of the core layer.
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dtype.cpp
  ${CMAKE_CURRENT_LIST_DIR}/error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hash.cpp
  ${CMAKE_CURRENT_LIST_DIR}/page_release.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parallel_copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quantization.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sparse.cpp
  ${CMAKE_CURRENT_LIST_DIR}/storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/value.cpp
  ${CMAKE_CURRENT_LIST_DIR}/value_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/value_repr.cpp
)
