// expect: skipped_tests names a test that is not a common test
// A skip list naming a test the suite does not have (transformers' test_inputs_embeds).
#include "toy_tester.hpp"

struct UnknownSkipTester : ToyTester {
  static constexpr tracetorch::testing::Skip skipped_tests[] = {{"test_inputs_embeds", "no such common test"}};
};
TRACETORCH_COMMON_MODEL_TESTS(UnknownSkipTester);
