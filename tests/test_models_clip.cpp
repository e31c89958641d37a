// <tracetorch/models/clip.hpp>: each CLIP part against the Python reference's values
// (tests/data/clip/make_clip_cases.py, llava_ref.py's restatement of modeling_clip.py), bit for
// bit, and the vision model's capture and call conventions.

#include <doctest/doctest.h>

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/models/clip.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace models_clip_test {

torch::Tensor clip_case(const std::string& name) {
  static tracetorch::safetensors::Reader reader(tracetorch_test::data_dir() / "clip" / "clip_cases.safetensors");
  return reader.load(name);
}

tracetorch::models::CLIPVisionConfig tiny_config() {
  tracetorch::models::CLIPVisionConfig config;
  config.hidden_size = 16;
  config.intermediate_size = 24;
  config.projection_dim = 16;
  config.num_hidden_layers = 3;
  config.num_attention_heads = 4;
  config.image_size = 8;
  config.patch_size = 4;
  return config;
}

tracetorch::models::CLIPVisionModel reference_model() {
  tracetorch::models::CLIPVisionModel model(tiny_config());
  tracetorch::checkpoint::load(*model, tracetorch_test::data_dir() / "clip" / "clip_weights.safetensors");
  model->eval();
  return model;
}

void expect_bitwise(const std::string& what, const torch::Tensor& mine, const torch::Tensor& expected) {
  DOCTEST_INFO(what);
  DOCTEST_REQUIRE(mine.sizes() == expected.sizes());
  DOCTEST_CHECK(torch::equal(mine, expected));
}

}  // namespace models_clip_test

DOCTEST_TEST_SUITE("models_clip") {

DOCTEST_TEST_CASE("models: each CLIP part computes what the Python reference computes, bit for bit") {
  using models_clip_test::clip_case;
  using models_clip_test::expect_bitwise;
  torch::NoGradGuard no_grad;
  auto model = models_clip_test::reference_model();
  expect_bitwise("embeddings", model->embeddings(clip_case("pixel_values")), clip_case("embeddings.output"));
  auto layer = (*model->encoder->layers)[1]->as<tracetorch::models::CLIPEncoderLayer>();
  const auto hidden = clip_case("hidden");
  const auto [output, weights] = layer->self_attn({.hidden_states = hidden, .attention_mask = torch::Tensor()});
  expect_bitwise("attention output", output, clip_case("attention.output"));
  expect_bitwise("attention weights", weights, clip_case("attention.weights"));
  const auto [masked, masked_weights] = layer->self_attn({.hidden_states = hidden, .attention_mask = clip_case("attention.mask")});
  expect_bitwise("masked attention output", masked, clip_case("attention_masked.output"));
  expect_bitwise("masked attention weights", masked_weights, clip_case("attention_masked.weights"));
  DOCTEST_CHECK(masked_weights.select(0, 1).select(-1, 0).abs().max().item<float>() == 0.0f);  // the masked key
  expect_bitwise("mlp (quick_gelu)", layer->mlp(hidden), clip_case("mlp.output"));
  expect_bitwise("encoder layer", layer->forward(hidden, torch::Tensor(), tracetorch::Kwargs{}), clip_case("layer.output"));
}

DOCTEST_TEST_CASE("models: CLIPVisionModel captures hidden_states (not tied) and attentions as upstream, bit for bit") {
  using models_clip_test::clip_case;
  using models_clip_test::expect_bitwise;
  auto model = models_clip_test::reference_model();
  const auto out = model(clip_case("pixel_values"), {}, {.output_hidden_states = true, .output_attentions = true});
  expect_bitwise("last_hidden_state", out.last_hidden_state, clip_case("model.last_hidden_state"));
  expect_bitwise("pooler_output", out.pooler_output, clip_case("model.pooler_output"));
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  DOCTEST_REQUIRE(out.hidden_states->size() == 4);  // after pre_layrnorm, then each of 3 layers
  for (std::size_t i = 0; i < 4; ++i) {
    expect_bitwise("hidden_states " + std::to_string(i), (*out.hidden_states)[i], clip_case("model.hidden_states_" + std::to_string(i)));
  }
  // Not tied: the last hidden state is the encoder's output, which is also last_hidden_state here
  // (CLIP's post_layernorm applies to the pooled class token only).
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.last_hidden_state));
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_REQUIRE(out.attentions->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    expect_bitwise("attentions " + std::to_string(i), (*out.attentions)[i], clip_case("model.attentions_" + std::to_string(i)));
  }
  const auto plain = model(clip_case("pixel_values"));
  DOCTEST_CHECK(!plain.hidden_states.has_value());
  DOCTEST_CHECK(!plain.attentions.has_value());
}

DOCTEST_TEST_CASE("models: CLIPVisionModel hands its flags down as **kwargs, as upstream's trace records them") {
  auto model = models_clip_test::reference_model();
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    model(models_clip_test::clip_case("pixel_values"), {}, {.output_hidden_states = true, .return_dict = true});
    DOCTEST_CHECK(guard.modules_not_called().empty());
  }
  const auto summary = tracetorch_test::read_json(dir / "CLIPVisionModel_debug_tree_SUMMARY.json").as_object();
  const auto& kwargs = summary.at("inputs").at("kwargs").as_object();
  DOCTEST_CHECK(kwargs.at("output_hidden_states") == "True");
  DOCTEST_CHECK(kwargs.at("return_dict") == "True");
  const auto& children = summary.at("children").as_array();
  std::vector<std::string> paths;
  for (const auto& child : children) paths.emplace_back(child.at("module_path").as_string());
  DOCTEST_CHECK(paths == std::vector<std::string>{"CLIPVisionModel.embeddings", "CLIPVisionModel.pre_layrnorm",
                                                  "CLIPVisionModel.encoder", "CLIPVisionModel.post_layernorm"});
  // encoder(inputs_embeds=h, output_hidden_states=True): return_dict popped, the flag handed on.
  const auto& encoder = children[2].as_object();
  const auto& encoder_kwargs = encoder.at("inputs").at("kwargs").as_object();
  DOCTEST_CHECK(encoder_kwargs.size() == 2);
  DOCTEST_CHECK(encoder_kwargs.at("output_hidden_states") == "True");
  // layers.0(h, None, output_hidden_states=True): attention_mask positional and None.
  const auto& layer = encoder.at("children").as_array()[0].as_object();
  DOCTEST_CHECK(layer.at("inputs").at("args").as_array().size() == 2);
  DOCTEST_CHECK(layer.at("inputs").at("args").as_array()[1] == "None");
  const auto& attention = layer.at("children").as_array()[1].as_object();
  DOCTEST_CHECK(std::string(attention.at("module_path").as_string()) == "CLIPVisionModel.encoder.layers.0.self_attn");
  const auto& attention_kwargs = attention.at("inputs").at("kwargs").as_object();
  DOCTEST_CHECK(attention_kwargs.at("attention_mask") == "None");
  DOCTEST_CHECK(attention_kwargs.at("output_hidden_states") == "True");
}

DOCTEST_TEST_CASE("models: a CLIPVisionConfig that does not fit together is refused with the key, a wrong image size too") {
  auto config = models_clip_test::tiny_config();
  config.num_attention_heads = 5;
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::models::CLIPVisionModel{config}, doctest::Contains("num_attention_heads"), tracetorch::Error);
  config = models_clip_test::tiny_config();
  config.hidden_act = "swish_typo";
  DOCTEST_CHECK_THROWS_AS(tracetorch::models::CLIPVisionModel{config}, tracetorch::Error);
  tracetorch::models::CLIPVisionModel model(models_clip_test::tiny_config());
  DOCTEST_CHECK_THROWS_WITH_AS(model(torch::randn({1, 3, 16, 16})), doctest::Contains("doesn't match model (8*8)"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(model(torch::randn({1, 3, 8, 8}), {.interpolate_pos_encoding = true}),
                               doctest::Contains("interpolate_pos_encoding"), tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE("models_clip")
