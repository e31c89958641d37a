# Fails when a model's library defines a symbol of the non-finite sentinel. The sentinel is
# compiled only where a caller sets find_nonfinite (tracetorch::NonFiniteTarget), so a model's
# translation units cost what the model asks for (docs/performance.md, "Compile cost").
#   cmake -DNM=nm "-DLIBRARIES=a.a|b.a" -P model_library_symbols.cmake
string(REPLACE "|" ";" libraries "${LIBRARIES}")
set(failed "")
foreach(library IN LISTS libraries)
  execute_process(COMMAND ${NM} --demangle --defined-only ${library}
                  OUTPUT_VARIABLE symbols RESULT_VARIABLE status ERROR_VARIABLE errors)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${library}: ${errors}")
  endif()
  string(REGEX MATCHALL "[^\n]*NonFiniteSentinel[^\n]*" found "${symbols}")
  list(LENGTH found count)
  message(STATUS "${library}: ${count} symbols of the sentinel")
  if(count GREATER 0)
    list(GET found 0 example)
    string(APPEND failed "${library} defines ${count} symbols of the sentinel, e.g. ${example}\n")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "${failed}")
endif()
