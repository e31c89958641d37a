// expect: test_inputs_embeds_matches_input_ids needs model->get_input_embeddings\(\)
// A model without an inputs_embeds path must list that test in skipped_tests, with a reason:
// the suite does not let it pass silently.
#include "toy_tester.hpp"

struct NoEmbedsSkipTester : ToyTester {
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_hidden_states_output", "no hidden_states"},
      {"test_attention_outputs", "no attentions"},
      {"test_cross_attention_outputs", "no cross_attentions"}};
};
TRACETORCH_COMMON_MODEL_TESTS(NoEmbedsSkipTester);
