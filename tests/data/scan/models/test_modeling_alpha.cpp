// Fixture: adjacent literals, comments, escapes, designated initializers, a raw string.
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

/* TRACETORCH_COMMON_MODEL_TESTS(CommentedOutTester); is in a comment: not a model. */
struct AlphaTester {
  static constexpr const char* model_name = "Alpha"
                                            "Model";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_inputs_embeds_"  // a name split over two literals
       "matches_input_ids",
       "Alpha has no \"inputs_embeds\" path \u2014 by design"},
      // {"test_save_load", "a commented-out skip does not count"},
      /* {"test_training", "nor does this one"}, */
      {.test = "test_cross_attention_outputs", .reason = R"(encoder only (no "encoder_hidden_states"))"},
  };
  const char* decoy() const { return "skipped_tests[] = {{\"test_determinism\", \"inside a function\"}};"; }
};

TRACETORCH_COMMON_MODEL_TESTS(AlphaTester);
