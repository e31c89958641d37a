// Fixture: a reason that is a constant cannot be read from the source text.
constexpr const char* kReason = "a constant";
struct NotLiteralTester {
  static constexpr const char* model_name = "NotLiteralModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {{"test_save_load", kReason}};
};
TRACETORCH_COMMON_MODEL_TESTS(NotLiteralTester);
