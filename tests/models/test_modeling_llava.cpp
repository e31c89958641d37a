// The common model tests on the Llava port's LlavaModel (examples/llava): pixel_values and
// input_ids with one image's patches as image tokens per sample.

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "llava/llava.hpp"

namespace {

struct LlavaModelTester {
  static constexpr const char* model_name = "LlavaModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_cross_attention_outputs", "decoder-only language model: there is no encoder to cross-attend to"},
      {"test_batching_equivalence",
       "image_hidden_states is [images * patches, hidden] as upstream's, "
       "not batch-first, so a row of the batch is not a row of it"},
      {"test_training",
       "with vision_feature_layer -2 (upstream's default) the vision tower's last layer and "
       "post_layernorm feed nothing, as upstream's: they get no gradient"},
  };

  llava::LlavaConfig config = [] {
    auto c = llava::LlavaConfig{};
    c.vision_config.hidden_size = 16;
    c.vision_config.intermediate_size = 24;
    c.vision_config.num_hidden_layers = 2;
    c.vision_config.num_attention_heads = 2;
    c.vision_config.image_size = 8;
    c.vision_config.patch_size = 4;
    c.text_config.vocab_size = 99;
    c.text_config.hidden_size = 32;
    c.text_config.intermediate_size = 37;
    c.text_config.num_hidden_layers = 2;
    c.text_config.num_attention_heads = 4;
    c.text_config.num_key_value_heads = 2;
    c.text_config.max_position_embeddings = 64;
    c.image_token_index = 98;
    return c;
  }();
  static constexpr std::int64_t batch_size = 2, seq_length = 9;

  llava::LlavaModel make_model() const { return llava::LlavaModel(config); }
  tracetorch::testing::Inputs make_inputs() const {
    auto ids = torch::randint(3, 98, {batch_size, seq_length});
    ids.slice(1, 2, 6).fill_(config.image_token_index);  // 4 patches per image
    return {{"input_ids", ids}, {"pixel_values", torch::randn({batch_size, 3, 8, 8})}};
  }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = batch_size,
            .seq_length = seq_length,
            .hidden_size = config.text_config.hidden_size,
            .num_hidden_layers = config.text_config.num_hidden_layers,
            .num_attention_heads = config.text_config.num_attention_heads};
  }
  llava::LlavaModelOutputWithPast forward(llava::LlavaModel& model, const tracetorch::testing::Inputs& inputs,
                                          const tracetorch::OutputOptions& options) const {
    return model->forward({.input_ids = tracetorch::testing::input_or_none(inputs, "input_ids"),
                           .pixel_values = inputs.at("pixel_values"),
                           .inputs_embeds = tracetorch::testing::input_or_none(inputs, "inputs_embeds")},
                          options);
  }
};

}  // namespace

TRACETORCH_COMMON_MODEL_TESTS(LlavaModelTester);
