# Install rules, package config with components, build-tree export.
include(CMakePackageConfigHelpers)

set(NIXL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/nixl)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/umbrella/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS nixl_core EXPORT nixl-core-targets)
install(EXPORT nixl-core-targets NAMESPACE nixl:: DESTINATION ${NIXL_CMAKE_DIR})
export(EXPORT nixl-core-targets NAMESPACE nixl::
       FILE ${PROJECT_BINARY_DIR}/nixl-core-targets.cmake)

# Each component installs its own export set nixl-<name>-targets (see nixl_install_component).
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nixl-config.cmake.in
  ${PROJECT_BINARY_DIR}/nixl-config.cmake INSTALL_DESTINATION ${NIXL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nixl-config-version.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/nixl-config.cmake ${PROJECT_BINARY_DIR}/nixl-config-version.cmake
  DESTINATION ${NIXL_CMAKE_DIR})
