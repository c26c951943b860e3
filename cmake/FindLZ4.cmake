# FindLZ4: liblz4 (Debian's liblz4-dev), as the imported target LZ4::LZ4.
# pkg-config's answer is used as a hint when pkg-config is there; without
# it (a project that vendors torchport to read checkpoints may have none)
# the header and library are looked for in the usual places.
if(NOT CMAKE_DISABLE_FIND_PACKAGE_PkgConfig)
  find_package(PkgConfig QUIET)
endif()
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_LZ4 QUIET liblz4)
endif()
find_path(LZ4_INCLUDE_DIR lz4frame.h HINTS ${PC_LZ4_INCLUDE_DIRS})
find_library(LZ4_LIBRARY NAMES lz4 HINTS ${PC_LZ4_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LZ4 REQUIRED_VARS LZ4_LIBRARY LZ4_INCLUDE_DIR)
if(LZ4_FOUND AND NOT TARGET LZ4::LZ4)
  add_library(LZ4::LZ4 UNKNOWN IMPORTED)
  set_target_properties(LZ4::LZ4 PROPERTIES IMPORTED_LOCATION "${LZ4_LIBRARY}"
                                            INTERFACE_INCLUDE_DIRECTORIES "${LZ4_INCLUDE_DIR}")
endif()
mark_as_advanced(LZ4_INCLUDE_DIR LZ4_LIBRARY)
