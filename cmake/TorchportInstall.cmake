# Install rules: headers, the static and shared libraries, the CLI, a CMake
# package (torchportConfig.cmake with a version file and namespaced targets)
# and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TORCHPORT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/torchport)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/torchport DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development)
install(FILES ${PROJECT_BINARY_DIR}/include/torchport/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/torchport COMPONENT development)

set(torchport_install_targets torchport)
if(TARGET torchport_shared)
  list(APPEND torchport_install_targets torchport_shared)
endif()
install(TARGETS ${torchport_install_targets} EXPORT torchportTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(EXPORT torchportTargets NAMESPACE torchport:: DESTINATION ${TORCHPORT_CMAKE_DIR}
        COMPONENT development)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/torchportConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/torchportConfig.cmake
                              INSTALL_DESTINATION ${TORCHPORT_CMAKE_DIR})
# 0.x releases may break compatibility between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/torchportConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/torchportConfig.cmake ${PROJECT_BINARY_DIR}/torchportConfigVersion.cmake
        ${PROJECT_SOURCE_DIR}/cmake/TorchportEmbed.cmake
        DESTINATION ${TORCHPORT_CMAKE_DIR} COMPONENT development)

configure_file(${PROJECT_SOURCE_DIR}/cmake/torchport.pc.in ${PROJECT_BINARY_DIR}/torchport.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/torchport.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT development)

if(TARGET torchport_cli)
  install(TARGETS torchport_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()
