#pragma once
// The toy model and tester the common-model-tests snippets share: each snippet derives a tester
// that adds the skip list it is about, and must fail to compile for that reason alone.
#define DOCTEST_CONFIG_NO_SHORT_MACRO_NAMES
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

struct ToyImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x, const tracetorch::OutputOptions& = {}) { return x; }
};
TRACEABLE(Toy);

/// No inputs_embeds path, no hidden_states, attentions or cross_attentions in its output.
struct ToyTester {
  static constexpr const char* model_name = "Toy";
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
