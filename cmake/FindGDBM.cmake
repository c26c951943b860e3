# FindGDBM: libgdbm (Debian's libgdbm-dev), as the imported target GDBM::GDBM.
# Debian ships no pkg-config file for it: the header and library are looked
# for in the usual places.
find_path(GDBM_INCLUDE_DIR gdbm.h)
find_library(GDBM_LIBRARY NAMES gdbm)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GDBM REQUIRED_VARS GDBM_LIBRARY GDBM_INCLUDE_DIR)
if(GDBM_FOUND AND NOT TARGET GDBM::GDBM)
  add_library(GDBM::GDBM UNKNOWN IMPORTED)
  set_target_properties(GDBM::GDBM PROPERTIES IMPORTED_LOCATION "${GDBM_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${GDBM_INCLUDE_DIR}")
endif()
mark_as_advanced(GDBM_INCLUDE_DIR GDBM_LIBRARY)
