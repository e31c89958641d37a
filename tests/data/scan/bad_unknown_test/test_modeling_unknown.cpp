// Fixture: transformers' name test_inputs_embeds is not one of tracetorch's common tests.
struct UnknownTester {
  static constexpr const char* model_name = "UnknownModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_model_is_small", "fine"},
      {"test_inputs_embeds", "no such common test"},
  };
};
TRACETORCH_COMMON_MODEL_TESTS(UnknownTester);
