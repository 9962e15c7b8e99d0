# Runs `mpiexec -n 2 PROGRAM MODE` and passes when the job ends non-zero within LIMIT
# seconds with output matching EXPECT (the rank that failed, named by kiln::dist or mpirun).
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${PROGRAM} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT ${LIMIT})
string(TIMESTAMP stop "%s")
math(EXPR took "${stop} - ${start}")
message(STATUS "mode ${MODE}: exit '${rc}' after ${took} s; output:\n${out}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "mode ${MODE}: the job did not end by itself within ${LIMIT} s (${rc})")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "mode ${MODE}: the job exited 0; a failed rank must make it fail")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "mode ${MODE}: the output does not name the failed rank (expected /${EXPECT}/)")
endif()
