# nixl_install_component(<name> [DEPENDENCIES "<find_dependency line>;..."])
# Installs target nixl_<name> (export name <name>) with its headers' include dir, an export set
# nixl-<name>-targets, and a file listing the dependencies the package config must find.
function(nixl_install_component name)
  cmake_parse_arguments(C "" "" "DEPENDENCIES;INCLUDE_DIRS" ${ARGN})
  set_target_properties(nixl_${name} PROPERTIES EXPORT_NAME ${name})
  if(NOT NIXL_INSTALL)
    return()
  endif()
  foreach(dir ${C_INCLUDE_DIRS})
    install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endforeach()
  install(TARGETS nixl_${name} EXPORT nixl-${name}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT nixl-${name}-targets NAMESPACE nixl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nixl)
  export(EXPORT nixl-${name}-targets NAMESPACE nixl::
         FILE ${PROJECT_BINARY_DIR}/nixl-${name}-targets.cmake)
  set(deps "")
  foreach(d ${C_DEPENDENCIES})
    string(APPEND deps "${d}\n")
  endforeach()
  file(WRITE ${PROJECT_BINARY_DIR}/nixl-${name}-deps.cmake "${deps}")
  install(FILES ${PROJECT_BINARY_DIR}/nixl-${name}-deps.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nixl)
endfunction()
