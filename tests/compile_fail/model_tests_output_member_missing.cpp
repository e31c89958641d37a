// expect: the model's output struct lacks the member this common test reads
// A test the tester runs reads an output member the struct does not have (hidden_states here):
// one message saying which member each such test reads, and no error from the test's body.
#include "toy_tester.hpp"

struct NoHiddenStatesSkipTester : ToyTester {
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_inputs_embeds_matches_input_ids", "no inputs_embeds path"},
      {"test_attention_outputs", "no attentions"},
      {"test_cross_attention_outputs", "no cross_attentions"}};
};
TRACETORCH_COMMON_MODEL_TESTS(NoHiddenStatesSkipTester);
