# Installs BUILD_DIR into WORK_DIR/prefix, then configures, builds and runs the
# consumer project in CONSUMER_DIR against it, as another team would.
# MUST_NOT_FIND: names (comma-separated) that must not appear in the consumer's CMake cache (the
# dependencies of components it did not ask for). EXPECT_CONFIGURE_ERROR: the
# consumer's configuration must fail, saying this. SCENARIO (instead of a
# consumer): the installed bin/demandflight simulates it from the prefix, as a
# user who ran `cmake --install` would (its simulator module found next to the
# real executable).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
if(DEFINED SCENARIO)
  execute_process(COMMAND ${WORK_DIR}/prefix/bin/demandflight sim ${SCENARIO}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  string(FIND "${out}" "outcomes   succeeded" at)
  if(NOT rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "the installed bin/demandflight failed (${rc}):\n${out}${err}")
  endif()
  return()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}"
                        "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(DEFINED EXPECT_CONFIGURE_ERROR)
  string(FIND "${out}${err}" "${EXPECT_CONFIGURE_ERROR}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "configuring the consumer should fail saying \"${EXPECT_CONFIGURE_ERROR}\"; "
                        "it returned ${rc}:\n${out}${err}")
  endif()
  message(STATUS "refused as expected: ${EXPECT_CONFIGURE_ERROR}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}\n${out}${err}")
endif()
file(READ ${WORK_DIR}/build/CMakeCache.txt cache)
string(REPLACE "," ";" must_not_find "${MUST_NOT_FIND}")
foreach(name ${must_not_find})
  string(FIND "${cache}" "${name}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the consumer's configuration looked for ${name}, which it does not need")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer ${WORK_DIR}/cache RESULT_VARIABLE rc
                OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed: ${rc}")
endif()
