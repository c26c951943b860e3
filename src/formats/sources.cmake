# Sources of the formats layer.
target_sources(torchport PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/catalog.cpp
  ${CMAKE_CURRENT_LIST_DIR}/materialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/open.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_legacy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_tar.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pytorch_zip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/torch_common.cpp
)
