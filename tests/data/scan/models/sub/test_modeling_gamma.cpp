// Fixture: one skip, in a subdirectory.
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

struct GammaTester;  // a declaration first: the scanner reads the definition below

struct GammaTester {
  static constexpr const char* model_name = "GammaModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_inputs_embeds_matches_input_ids", "pixel_values only, no input_ids"}};
};

TRACETORCH_COMMON_MODEL_TESTS(GammaTester);
