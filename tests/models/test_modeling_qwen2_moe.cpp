// The common model tests on the Qwen2-MoE port (examples/qwen2_moe), with a tiny config: two
// sparse layers around a dense one (mlp_only_layers), 4 experts top-2.

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "qwen2_moe/qwen2_moe.hpp"

namespace qwen2_moe_model_tests {

struct Qwen2MoeModelTester {
  static constexpr const char* model_name = "Qwen2MoeModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_cross_attention_outputs", "decoder-only: there is no encoder to cross-attend to"},
      {"test_inputs_embeds_matches_input_ids", "the tester calls the port with input_ids only"},
      {"test_batching_equivalence",
       "router_logits are [batch * seq, num_experts] (tokens flattened, as upstream's router returns them), "
       "which the common test slices by batch row"},
  };

  qwen2_moe::Qwen2MoeConfig config = [] {
    qwen2_moe::Qwen2MoeConfig c;
    c.vocab_size = 99;
    c.hidden_size = 32;
    c.intermediate_size = 37;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.max_position_embeddings = 64;
    c.moe_intermediate_size = 16;
    c.shared_expert_intermediate_size = 24;
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.mlp_only_layers = {1};
    return c;
  }();
  static constexpr std::int64_t batch_size = 2, seq_length = 7;

  qwen2_moe::Qwen2MoeModel make_model() const {
    qwen2_moe::Qwen2MoeModel model(config);
    torch::NoGradGuard no_grad;  // the experts' parameters start empty, as upstream's before post_init
    for (auto& parameter : model->named_parameters()) {
      if (parameter.key().find("experts.") != std::string::npos) parameter.value().normal_(0.0, 0.02);
    }
    return model;
  }
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
  qwen2_moe::MoeModelOutputWithPast forward(qwen2_moe::Qwen2MoeModel& model, const tracetorch::testing::Inputs& inputs,
                                            const tracetorch::OutputOptions& options) const {
    return model->forward({.input_ids = inputs.at("input_ids")}, options);
  }
};

}  // namespace qwen2_moe_model_tests

TRACETORCH_COMMON_MODEL_TESTS(qwen2_moe_model_tests::Qwen2MoeModelTester);
