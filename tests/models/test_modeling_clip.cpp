// The common model tests on the shared CLIP vision model (<tracetorch/models/clip.hpp>).

#include <doctest/doctest.h>
#include <tracetorch/models/clip.hpp>
#include <tracetorch/testing.hpp>

namespace {

struct CLIPVisionModelTester {
  static constexpr const char* model_name = "CLIPVisionModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_cross_attention_outputs", "an encoder only: there is nothing to cross-attend to"},
      {"test_inputs_embeds_matches_input_ids",
       "a vision model: it takes pixel_values, "  // adjacent literals, as the scanner must read them
       "there are no input_ids and no inputs_embeds path"},
      {"test_training",
       "post_layernorm feeds only pooler_output, as upstream's: "
       "a loss on last_hidden_state gives it no gradient"},
  };

  tracetorch::models::CLIPVisionConfig config = [] {
    tracetorch::models::CLIPVisionConfig c;  // 8 x 8 images in 4 x 4 patches, hidden 16, 2 layers, 4 heads
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.image_size = 8;
    c.patch_size = 4;
    return c;
  }();
  static constexpr std::int64_t batch_size = 2;

  tracetorch::models::CLIPVisionModel make_model() const { return tracetorch::models::CLIPVisionModel(config); }
  tracetorch::testing::Inputs make_inputs() const {
    return {{"pixel_values", torch::randn({batch_size, config.num_channels, config.image_size, config.image_size})}};
  }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = batch_size,
            .seq_length = 5,  // class token + 4 patches
            .hidden_size = config.hidden_size,
            .num_hidden_layers = config.num_hidden_layers,
            .num_attention_heads = config.num_attention_heads};
  }
  tracetorch::models::BaseModelOutputWithPooling forward(tracetorch::models::CLIPVisionModel& model,
                                                         const tracetorch::testing::Inputs& inputs,
                                                         const tracetorch::OutputOptions& options) const {
    return model->forward(inputs.at("pixel_values"), {}, options);
  }
};

}  // namespace

TRACETORCH_COMMON_MODEL_TESTS(CLIPVisionModelTester);
