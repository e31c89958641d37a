// The common model tests on the ViT-style image encoder (examples/vision).

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "vision/vision.hpp"

namespace {

struct ViTModelTester {
  static constexpr const char* model_name = "ViTModel";
  static constexpr tracetorch::testing::Skip skipped_tests[] = {
      {"test_cross_attention_outputs", "an encoder only: there is nothing to cross-attend to"},
      {"test_inputs_embeds_matches_input_ids",
       "a vision model: it takes pixel_values, "  // adjacent literals, as the scanner must read them
       "there are no input_ids and no inputs_embeds path"},
  };

  vision::ViTConfig config{};  // 16 x 16 images in 4 x 4 patches, hidden 32, 2 layers, 4 heads
  static constexpr std::int64_t batch_size = 2;

  vision::ViTModel make_model() const { return vision::ViTModel(config); }
  tracetorch::testing::Inputs make_inputs() const {
    return {{"pixel_values", torch::randn({batch_size, config.num_channels, config.image_size, config.image_size})}};
  }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = batch_size,
            .seq_length = config.num_patches() + 1,  // [CLS] + patches
            .hidden_size = config.hidden_size,
            .num_hidden_layers = config.num_hidden_layers,
            .num_attention_heads = config.num_attention_heads};
  }
  vision::BaseModelOutput forward(vision::ViTModel& model, const tracetorch::testing::Inputs& inputs,
                                  const tracetorch::OutputOptions& options) const {
    return model->forward(inputs.at("pixel_values"), options);
  }
};

}  // namespace

TRACETORCH_COMMON_MODEL_TESTS(ViTModelTester);
