# Builds one compile_fail target, which must fail with EXPECTED in its output and at most
# MAX_ERRORS lines saying "error:" (a clear message, not a cascade).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target ${TARGET}
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but must not")
endif()
if(NOT output MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${TARGET}: the expected message is missing:\n  ${EXPECTED}\n--- compiler output ---\n${output}")
endif()
string(REGEX MATCHALL "error:" errors "${output}")
list(LENGTH errors error_count)
if(error_count GREATER MAX_ERRORS)
  message(FATAL_ERROR "${TARGET}: ${error_count} errors, at most ${MAX_ERRORS} expected:\n${output}")
endif()
message(STATUS "${TARGET}: failed as expected with ${error_count} error line(s)")
