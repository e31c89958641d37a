// expect: skipped_tests names a test that is not a common test
// A skip list naming a test the suite does not have (transformers' test_inputs_embeds).
#define DOCTEST_CONFIG_NO_SHORT_MACRO_NAMES
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

struct ToyImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x, const tracetorch::OutputOptions& = {}) { return x; }
};
TRACEABLE(Toy);

struct ToyTester {
  static constexpr const char* model_name = "Toy";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {{"test_inputs_embeds", "no such common test"}};
  Toy make_model() const { return Toy(); }
  tracetorch::testing::Inputs make_inputs() const { return {{"x", torch::zeros({2, 3, 4})}}; }
  tracetorch::testing::ExpectedSizes sizes() const { return {}; }
  struct Output {
    torch::Tensor last_hidden_state;
  };
  Output forward(Toy& model, const tracetorch::testing::Inputs& inputs, const tracetorch::OutputOptions& o) const {
    return {model->forward(inputs.at("x"), o)};
  }
};
TRACETORCH_COMMON_MODEL_TESTS(ToyTester);
