# nixl_add_component(<name> SOURCES <files...>
#                    [PUBLIC <libraries...>] [PRIVATE <libraries...>]
#                    [HAS <NAME...>] [DEPENDENCIES "<find_dependency line>;..."])
# The one shape of a component (a backend, the metadata layer, an exporter): library nixl_<name>
# (alias nixl::<name>, export name <name>, file libnixl_<name>, position-independent, C++20) over
# SOURCES, with include/ beside the calling CMakeLists.txt as its public include dir, linking
# nixl::core and PUBLIC publicly and PRIVATE privately; its users get NIXL_HAS_<NAME>=1 for each
# HAS name (default: the upper-cased <name>); installed with nixl_install_component, whose
# package config then finds DEPENDENCIES. What is the component's own (optional sources, its C
# library's include dirs) follows the call as target_* calls on nixl_<name>.
function(nixl_add_component name)
  cmake_parse_arguments(C "" "" "SOURCES;PUBLIC;PRIVATE;HAS;DEPENDENCIES" ${ARGN})
  if(C_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "nixl_add_component(${name}): unknown arguments ${C_UNPARSED_ARGUMENTS}")
  endif()
  add_library(nixl_${name} ${C_SOURCES})
  add_library(nixl::${name} ALIAS nixl_${name})
  set_target_properties(nixl_${name} PROPERTIES
    OUTPUT_NAME nixl_${name}
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(nixl_${name} PUBLIC cxx_std_20)
  target_include_directories(nixl_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(nixl_${name} PUBLIC nixl::core ${C_PUBLIC} PRIVATE ${C_PRIVATE})
  if(NOT C_HAS)
    string(TOUPPER ${name} C_HAS)
  endif()
  foreach(h ${C_HAS})
    target_compile_definitions(nixl_${name} INTERFACE NIXL_HAS_${h}=1)
  endforeach()
  nixl_install_component(${name} INCLUDE_DIRS ${CMAKE_CURRENT_SOURCE_DIR}/include
                         DEPENDENCIES ${C_DEPENDENCIES})
endfunction()

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
