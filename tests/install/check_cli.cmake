# Installs BUILD_DIR into WORK_DIR/prefix and runs the installed command from
# there, as a user who ran `cmake --install` would: bin/demandflight simulates
# a bundled scenario (its simulator module found next to the real executable).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/prefix/bin/demandflight sim ${SCENARIO}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
string(FIND "${out}" "outcomes   succeeded" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "the installed bin/demandflight failed (${rc}):\n${out}${err}")
endif()
