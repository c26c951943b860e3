# Sources of the record layer: key remapping and filtering for now.
target_sources(torchport PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/remap.cpp
)
target_link_libraries(torchport PRIVATE PkgConfig::PCRE2)
