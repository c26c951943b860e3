# Sources of the open layer: the format registry and open(), above the
# formats and the recorders it dispatches to.
target_sources(torchport_objects PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/open.cpp
  ${CMAKE_CURRENT_LIST_DIR}/registry.cpp
)
