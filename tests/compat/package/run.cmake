# cmake -DBUILD=<nixl build tree> -DSRC=<this folder> -DWORK=<scratch> -P run.cmake
# Installs the build tree into WORK/prefix, builds the consumer against it and runs both programs.
include(${CMAKE_CURRENT_LIST_DIR}/../../package/script.cmake)
run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/consumer -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK}/prefix)
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/nixl_program)
run(${WORK}/consumer/c_program)
