# Sources of the open layer: the format registry and open(), above the
# formats (our own record files included) it dispatches to.
target_sources(torchport_read_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/open.cpp
  ${CMAKE_CURRENT_LIST_DIR}/registry.cpp
)
