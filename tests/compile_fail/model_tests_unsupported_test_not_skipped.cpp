// expect: test_inputs_embeds_matches_input_ids needs model->get_input_embeddings\(\)
// A model without an inputs_embeds path must list that test in skipped_tests, with a reason:
// the suite does not let it pass silently.
#define DOCTEST_CONFIG_NO_SHORT_MACRO_NAMES
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

struct ToyImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x, const tracetorch::OutputOptions& = {}) { return x; }
};
TRACEABLE(Toy);

struct ToyTester {
  static constexpr const char* model_name = "Toy";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_hidden_states_output", "no hidden_states"},
      {"test_attention_outputs", "no attentions"},
      {"test_cross_attention_outputs", "no cross_attentions"}};
  Toy make_model() const { return Toy(); }
  tracetorch::testing::Inputs make_inputs() const { return {{"input_ids", torch::zeros({2, 3}, torch::kLong)}}; }
  tracetorch::testing::ExpectedSizes sizes() const { return {}; }
  struct Output {
    torch::Tensor last_hidden_state;
  };
  Output forward(Toy& model, const tracetorch::testing::Inputs& inputs, const tracetorch::OutputOptions& o) const {
    return {model->forward(inputs.at("input_ids"), o)};
  }
};
TRACETORCH_COMMON_MODEL_TESTS(ToyTester);
