# Shared by the package tests' scripts (cmake -DWORK=<scratch> ... -P run.cmake): starts from an
# empty WORK and gives run(<command...>), which stops the script at the first command that fails.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
