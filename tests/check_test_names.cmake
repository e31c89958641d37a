# ctest's doctest discovery cuts a test name at ';': the cut name matches no test case, doctest
# runs nothing, and ctest reports Passed. Fails when any test case of TEST_BINARIES holds a ';'.
string(REPLACE "|" ";" TEST_BINARIES "${TEST_BINARIES}")  # '|'-separated: a ';' would not survive add_test
foreach(binary IN LISTS TEST_BINARIES)
  execute_process(COMMAND ${binary} --list-test-cases --no-version=true
                  RESULT_VARIABLE result OUTPUT_VARIABLE listing ERROR_VARIABLE listing)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${binary} --list-test-cases failed (${result}):\n${listing}")
  endif()
  string(REPLACE ";" "<SEMICOLON>" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  foreach(line IN LISTS lines)
    if(line MATCHES "<SEMICOLON>")
      string(REPLACE "<SEMICOLON>" ";" line "${line}")
      message(SEND_ERROR "a test name holds ';', so ctest would run nothing for it: ${line}")
    endif()
  endforeach()
endforeach()
