// The common model tests on the Llama port (examples/llama), with a tiny config.

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "llama/llama.hpp"

namespace {

struct LlamaModelTester {
  static constexpr const char* model_name = "LlamaModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_cross_attention_outputs", "decoder-only: there is no encoder to cross-attend to"},
      {"test_inputs_embeds_matches_input_ids",
       "the port's forward takes input_ids only; it has no inputs_embeds argument"},
  };

  // Grouped-query attention (4 heads over 2 key/value heads), as the real model can have.
  llama::LlamaConfig config{.vocab_size = 99,
                            .hidden_size = 32,
                            .intermediate_size = 37,
                            .num_hidden_layers = 2,
                            .num_attention_heads = 4,
                            .num_key_value_heads = 2,
                            .max_position_embeddings = 64};
  static constexpr std::int64_t batch_size = 2, seq_length = 7;

  llama::LlamaModel make_model() const { return llama::LlamaModel(config); }
  tracetorch::testing::Inputs make_inputs() const {
    return {{"input_ids", torch::randint(config.vocab_size, {batch_size, seq_length})}};
  }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = batch_size,
            .seq_length = seq_length,
            .hidden_size = config.hidden_size,
            .num_hidden_layers = config.num_hidden_layers,
            .num_attention_heads = config.num_attention_heads};
  }
  llama::BaseModelOutputWithPast forward(llama::LlamaModel& model, const tracetorch::testing::Inputs& inputs,
                                         const tracetorch::OutputOptions& options) const {
    return model->forward({.input_ids = inputs.at("input_ids")}, options);
  }
};

}  // namespace

TRACETORCH_COMMON_MODEL_TESTS(LlamaModelTester);
