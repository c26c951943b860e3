# Install rules: the public headers, each component's static and shared
# libraries with its own exported targets, the CLI, a CMake package
# (torchportConfig.cmake with a version file; `find_package(torchport
# COMPONENTS read)` loads and requires only what read needs) and one
# pkg-config file per component plus torchport.pc for all of them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TORCHPORT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/torchport)

# include/torchport/detail/ holds internals of the sources (checked
# arithmetic, seeded hashes, parallel copies, work counters) that no public
# header includes: it is not installed.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/torchport DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development REGEX "/include/torchport/detail$" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/torchport/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/torchport COMPONENT development)

# One export set per component (torchport-<component>-targets.cmake), and
# one for the umbrella targets.
foreach(component IN LISTS torchport_built_components)
  set(targets torchport_${component})
  if(TARGET torchport_${component}_shared)
    list(APPEND targets torchport_${component}_shared)
  endif()
  install(TARGETS ${targets} EXPORT torchport-${component}-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  install(EXPORT torchport-${component}-targets NAMESPACE torchport:: DESTINATION ${TORCHPORT_CMAKE_DIR}
          COMPONENT development)
endforeach()
if(TARGET torchport)
  set(torchport_umbrella_targets torchport)
  if(TARGET torchport_shared)
    list(APPEND torchport_umbrella_targets torchport_shared)
  endif()
  install(TARGETS ${torchport_umbrella_targets} EXPORT torchport-targets)
  install(EXPORT torchport-targets NAMESPACE torchport:: DESTINATION ${TORCHPORT_CMAKE_DIR}
          COMPONENT development)
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/torchportConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/torchportConfig.cmake
                              INSTALL_DESTINATION ${TORCHPORT_CMAKE_DIR})
# 0.x releases may break compatibility between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/torchportConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/torchportConfig.cmake ${PROJECT_BINARY_DIR}/torchportConfigVersion.cmake
        ${PROJECT_SOURCE_DIR}/cmake/TorchportEmbed.cmake ${PROJECT_SOURCE_DIR}/cmake/FindLZ4.cmake ${PROJECT_SOURCE_DIR}/cmake/FindGDBM.cmake
        DESTINATION ${TORCHPORT_CMAKE_DIR} COMPONENT development)

# pkg-config: torchport-<component>.pc, each requiring the components it
# builds on, and torchport.pc requiring them all. The prefix is found from
# the .pc file's own place, so an installed tree can be moved (and
# `cmake --install --prefix` works).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH pc_up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" pc_up "${pc_up}")
  set(PC_PREFIX "\${pcfiledir}/${pc_up}")
endif()
function(torchport_pkg_config name description requires requires_private libs libs_private cflags)
  set(PC_NAME ${name})
  set(PC_DESCRIPTION ${description})
  set(PC_REQUIRES ${requires})
  set(PC_REQUIRES_PRIVATE ${requires_private})
  set(PC_LIBS ${libs})
  set(PC_LIBS_PRIVATE ${libs_private})
  set(PC_CFLAGS ${cflags})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/torchport.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT development)
endfunction()
# The static libraries, as the CMake targets torchport::<component> link
# them: a program linked with `pkg-config --libs torchport` runs without a
# runpath or LD_LIBRARY_PATH (with -L and -l the linker took the shared
# libraries, which the loader then did not find outside the system's paths).
# The static libraries' own dependencies are therefore public: Requires and
# Libs, not the .private fields. The shared libraries are the CMake targets
# torchport::<component>_shared.
set(v " = ${PROJECT_VERSION}")
torchport_pkg_config(torchport-read "torchport: reading and writing checkpoints (core, io, pickle, formats, open)"
                     "zlib liblzma libzstd liblz4 sqlite3" "" "\${libdir}/libtorchport-read.a -lbz2 -lgdbm -lpthread" ""
                     "-I\${includedir} -std=c++20")
if(TARGET torchport_record)
  torchport_pkg_config(torchport-record "torchport: typed modules (loading, export, torchport's record files)"
                       "torchport-read${v}, libpcre2-8" "" "\${libdir}/libtorchport-record.a" "" "")
endif()
if(TARGET torchport_nn)
  torchport_pkg_config(torchport-nn "torchport: the CPU backend and the module records"
                       "torchport-record${v}, openblas" "" "\${libdir}/libtorchport-nn.a" "" "")
endif()
if(TARGET torchport)
  torchport_pkg_config(torchport "PyTorch checkpoints in C++, without libtorch or Python"
                       "torchport-read${v}, torchport-record${v}, torchport-nn${v}" "" ""
                       "" "")
endif()

if(TARGET torchport_cli)
  install(TARGETS torchport_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()

# The licence, where Debian and the GNU layout put a package's documents.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
