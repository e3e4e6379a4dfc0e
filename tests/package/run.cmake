# cmake -DMODE=package|subdir|fetch -DSRC=<nixl source> -DWORK=<dir> [-DPREFIX=<install>]
#       [-DCOMPONENTS=a,b] -P run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/script.cmake)
# NIXL's C and C++ APIs have their own package test (tests/compat/package): left out here.
set(common -DCMAKE_BUILD_TYPE=Release -DNIXL_BUILD_TESTS=OFF -DNIXL_BUILD_BENCH=OFF
    -DNIXL_BUILD_EXAMPLES=OFF -DNIXL_BUILD_COMPAT=OFF)
set(comps "${COMPONENTS}")  # comma-separated
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/nixl-build -G Ninja ${common} -DNIXL_WITH_CUDA=OFF
      -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
  run(${CMAKE_COMMAND} --build ${WORK}/nixl-build)
  run(${CMAKE_COMMAND} --install ${WORK}/nixl-build)
  run(${CMAKE_COMMAND} -S ${SRC}/tests/package/consumer -B ${WORK}/consumer -G Ninja
      -DMODE=package -DCMAKE_PREFIX_PATH=${WORK}/prefix "-DWANT_COMPONENTS=${comps}")
  # The same build, found as a build tree (nixl_DIR) rather than installed; one build for both.
  run(${CMAKE_COMMAND} -S ${SRC}/tests/package/consumer -B ${WORK}/consumer-buildtree -G Ninja
      -DMODE=package -Dnixl_DIR=${WORK}/nixl-build "-DWANT_COMPONENTS=${comps}")
  run(${CMAKE_COMMAND} --build ${WORK}/consumer-buildtree)
  run(${WORK}/consumer-buildtree/consumer)
else()
  # add_subdirectory and FetchContent: how the project is pulled in is what these check (the
  # installed package above builds every component), so the components here are the README
  # example's (UCX, POSIX) and the build is unoptimised, to keep CI short.
  set(lean -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS=-O0 -DNIXL_WITH_GDS=OFF -DNIXL_WITH_OBJ=OFF
      -DNIXL_WITH_LIBFABRIC=OFF -DNIXL_WITH_METADATA=OFF -DNIXL_WITH_PROMETHEUS=OFF)
  set(comps "")
  foreach(c ucx posix)
    if(",${COMPONENTS}," MATCHES ",${c},")
      list(APPEND comps ${c})
    endif()
  endforeach()
  string(REPLACE ";" "," comps "${comps}")
  # FetchContent needs a source copy it may configure on its own (no build folders inside).
  run(${CMAKE_COMMAND} -S ${SRC}/tests/package/consumer -B ${WORK}/consumer -G Ninja
      -DMODE=${MODE} -DNIXL_SOURCE=${SRC} "-DWANT_COMPONENTS=${comps}" ${common} ${lean})
endif()
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/consumer)
