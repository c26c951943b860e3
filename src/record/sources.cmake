# Sources of the record layer: key remapping and filtering, adapters,
# precision settings, typed loading and its report.
target_sources(torchport PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/adapter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/remap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/save.cpp
)
target_link_libraries(torchport PRIVATE PkgConfig::PCRE2)
