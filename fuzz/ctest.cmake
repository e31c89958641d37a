# Registers the libFuzzer targets (safetensors, trace JSON, rules files) with ctest (included from tests/CMakeLists.txt): one test
# builds fuzz/ as a clang project of its own, then each fuzzer runs for a bounded time from
# fuzz/corpus/<target> (new inputs go to the build tree, never into the sources). Without a
# clang++ that can link -fsanitize=fuzzer (Debian: clang-14, libclang-rt-14-dev) the tests
# are reported as skipped.
set(TRACETORCH_FUZZ_SECONDS 20 CACHE STRING "How long each fuzzer runs under ctest")
find_program(TRACETORCH_CLANGXX NAMES clang++ clang++-14)
set(fuzz_source ${CMAKE_CURRENT_LIST_DIR})
set(fuzz_binary ${CMAKE_BINARY_DIR}/fuzz)
set(fuzz_usable FALSE)
if(TRACETORCH_CLANGXX)
  file(WRITE ${CMAKE_BINARY_DIR}/fuzz_probe/probe.cpp
       "#include <cstdint>\n#include <cstddef>\nextern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
  execute_process(COMMAND ${TRACETORCH_CLANGXX} -fsanitize=fuzzer,address,undefined probe.cpp -o probe
                  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz_probe RESULT_VARIABLE probe_result OUTPUT_QUIET ERROR_QUIET)
  if(probe_result EQUAL 0)
    set(fuzz_usable TRUE)
  endif()
endif()

if(fuzz_usable)
  add_test(NAME fuzz_build
           COMMAND sh -c "\"$0\" -S \"$1\" -B \"$2\" -DCMAKE_CXX_COMPILER=\"$3\" && \"$0\" --build \"$2\" -j2"
                   ${CMAKE_COMMAND} ${fuzz_source} ${fuzz_binary} ${TRACETORCH_CLANGXX})
  set_tests_properties(fuzz_build PROPERTIES FIXTURES_SETUP tracetorch_fuzzers TIMEOUT 900 LABELS fuzz)
  foreach(target fuzz_safetensors fuzz_trace_reader fuzz_rules)
    file(MAKE_DIRECTORY ${fuzz_binary}/corpus/${target})
    add_test(NAME ${target}
             COMMAND ${CMAKE_COMMAND} -E env ${fuzz_binary}/${target} -max_total_time=${TRACETORCH_FUZZ_SECONDS} -print_final_stats=1
                     -artifact_prefix=${fuzz_binary}/${target}-crash- ${fuzz_binary}/corpus/${target}
                     ${fuzz_source}/corpus/${target})
    set_tests_properties(${target} PROPERTIES FIXTURES_REQUIRED tracetorch_fuzzers TIMEOUT 300 LABELS fuzz)
  endforeach()
else()
  add_test(NAME fuzz_skipped COMMAND ${CMAKE_COMMAND} -E echo
           "fuzz tests skipped: no clang++ that links -fsanitize=fuzzer (install clang-14 libclang-rt-14-dev)")
  set_tests_properties(fuzz_skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped" LABELS fuzz)
endif()
