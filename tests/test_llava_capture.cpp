// examples/llava: what capture returns (the language model's hidden_states and attentions, and
// image_hidden_states, in upstream's order), the vision tower's hidden states through
// get_image_features, layer pruning, keywords handed on unpassed, and the nested config.

#include <doctest/doctest.h>

#include <llava/llava.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace llava_capture_test {

std::filesystem::path llava_dir() { return tracetorch_test::data_dir() / "llava"; }

llava::LlavaForConditionalGeneration fixture_model() {
  llava::LlavaForConditionalGeneration model(llava::LlavaConfig::from_json_file(llava_dir() / "config.json"));
  llava::load_state_dict(*model, llava_dir() / "model.safetensors");
  model->eval();
  return model;
}

llava::LlavaForConditionalGenerationInputs fixture_inputs() {
  const tracetorch::safetensors::Reader inputs(llava_dir() / "inputs.safetensors");
  return {.input_ids = inputs.load("input_ids"), .pixel_values = inputs.load("pixel_values"),
          .attention_mask = inputs.load("attention_mask")};
}

void expect_equal(const std::string& what, const torch::Tensor& mine, const torch::Tensor& expected) {
  DOCTEST_INFO(what);
  DOCTEST_REQUIRE(mine.sizes() == expected.sizes());
  DOCTEST_CHECK(torch::equal(mine, expected));
}

}  // namespace llava_capture_test

DOCTEST_TEST_SUITE("llava") {

DOCTEST_TEST_CASE("llava: capture returns logits, hidden_states, attentions, image_hidden_states as upstream, bit for bit") {
  using llava_capture_test::expect_equal;
  auto model = llava_capture_test::fixture_model();
  const tracetorch::safetensors::Reader expected(llava_capture_test::llava_dir() / "captured.safetensors");
  const auto out = model(llava_capture_test::fixture_inputs(),
                         {.output_hidden_states = true, .output_attentions = true, .use_cache = false});
  expect_equal("logits", out.logits, expected.load("logits"));
  expect_equal("image_hidden_states", out.image_hidden_states, expected.load("image_hidden_states"));
  DOCTEST_REQUIRE(out.hidden_states->size() == 3);  // the text embeddings, then each layer (the last after norm)
  for (std::size_t i = 0; i < 3; ++i) expect_equal("hidden_states", (*out.hidden_states)[i], expected.load("hidden_states_" + std::to_string(i)));
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) expect_equal("attentions", (*out.attentions)[i], expected.load("attentions_" + std::to_string(i)));
  // to_tuple(): upstream's order, None fields (loss, past_key_values without a cache) left out.
  const auto tuple = tracetorch::to_tuple(out);
  DOCTEST_REQUIRE(tuple.size() == 4);
  DOCTEST_CHECK(torch::equal(tuple[0].toTensor(), out.logits));
  DOCTEST_CHECK(tuple[1].toList().size() == 3);
  DOCTEST_CHECK(tuple[2].toList().size() == 2);
  DOCTEST_CHECK(torch::equal(tuple[3].toTensor(), out.image_hidden_states));
}

DOCTEST_TEST_CASE("llava: the vision tower's hidden states, as upstream reaches them through get_image_features, bit for bit") {
  using llava_capture_test::expect_equal;
  auto model = llava_capture_test::fixture_model();
  const tracetorch::safetensors::Reader expected(llava_capture_test::llava_dir() / "captured_vision.safetensors");
  const auto pixel_values = *llava_capture_test::fixture_inputs().pixel_values;
  const auto vision = model->get_image_features(pixel_values);  // Python: model.get_image_features(pixel_values=...)
  expect_equal("last_hidden_state", vision.last_hidden_state, expected.load("last_hidden_state"));
  DOCTEST_REQUIRE(vision.hidden_states->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    expect_equal("vision_hidden_states", (*vision.hidden_states)[i], expected.load("vision_hidden_states_" + std::to_string(i)));
  }
  DOCTEST_REQUIRE(vision.pooler_output.size() == 2);  // one [patches, text hidden] per image
  for (std::size_t i = 0; i < 2; ++i) expect_equal("pooler_output", vision.pooler_output[i], expected.load("pooler_output_" + std::to_string(i)));
  // The root call's image_hidden_states are those features, concatenated.
  const auto out = model(llava_capture_test::fixture_inputs());
  DOCTEST_CHECK(torch::equal(out.image_hidden_states, torch::cat(vision.pooler_output, 0)));
}

DOCTEST_TEST_CASE("llava: vision_feature_layer handed on unpassed is recorded as None and the config's -2 applies") {
  auto model = llava_capture_test::fixture_model();
  tracetorch_test::TempDir dir;
  torch::Tensor default_features;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / "default", .do_prune_layers = false});
    default_features = model(llava_capture_test::fixture_inputs()).image_hidden_states;
  }
  const auto summary = tracetorch_test::read_json(dir / "default" / "LlavaForConditionalGeneration_debug_tree_SUMMARY.json");
  const auto& kwargs = summary.at("children").as_array()[0].at("inputs").at("kwargs").as_object();
  DOCTEST_CHECK(kwargs.at("vision_feature_layer") == "None");
  DOCTEST_CHECK(kwargs.at("vision_feature_select_strategy") == "None");
  auto inputs = llava_capture_test::fixture_inputs();
  const auto vision = model->get_image_features(*inputs.pixel_values, {.vision_feature_layer = -2});
  DOCTEST_CHECK(torch::equal(default_features, torch::cat(vision.pooler_output, 0)));
  inputs.vision_feature_layer = -1;
  inputs.vision_feature_select_strategy = std::string("default");
  const auto last_layer = model(inputs).image_hidden_states;
  DOCTEST_CHECK(!torch::equal(last_layer, default_features));
  inputs.vision_feature_layer = 7;
  DOCTEST_CHECK_THROWS_WITH_AS(model(inputs), doctest::Contains("vision_feature_layer 7 is out of range"), tracetorch::Error);
}

DOCTEST_TEST_CASE("llava: pruning keeps the first and last layer of the vision and the text layer lists") {
  auto config = llava::LlavaConfig::from_json_file(llava_capture_test::llava_dir() / "config.json");
  config.vision_config.num_hidden_layers = 3;
  config.text_config.num_hidden_layers = 3;
  llava::LlavaForConditionalGeneration model(config);
  model->eval();
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = true});
    model(llava_capture_test::fixture_inputs());
  }
  const auto paths = tracetorch_test::module_paths(tracetorch_test::read_json(dir / "LlavaForConditionalGeneration_debug_tree_SUMMARY.json"));
  const auto has = [&](const std::string& path) { return std::find(paths.begin(), paths.end(), path) != paths.end(); };
  for (const std::string list : {"LlavaForConditionalGeneration.model.vision_tower.encoder.layers.",
                                 "LlavaForConditionalGeneration.model.language_model.layers."}) {
    DOCTEST_INFO(list);
    DOCTEST_CHECK(has(list + "0"));
    DOCTEST_CHECK(!has(list + "1"));
    DOCTEST_CHECK(has(list + "2"));
  }
}

DOCTEST_TEST_CASE("llava: the nested config is read by full key, unknown keys reported, a wrong type refused with its full key") {
  tracetorch::ConfigReport report;
  const auto config = llava::LlavaConfig::from_json_file(llava_capture_test::llava_dir() / "config.json", &report);
  DOCTEST_CHECK(config.vision_config.image_size == 8);
  DOCTEST_CHECK(config.text_config.num_key_value_heads == 2);
  DOCTEST_CHECK(config.text_config.rope_parameters.rope_theta == 10000.0);
  DOCTEST_CHECK(config.image_token_index == 117);
  DOCTEST_CHECK(report.unknown_keys.empty());
  tracetorch_test::TempDir dir;
  tracetorch_test::write_text(dir / "typo.json", R"({"vision_config": {"hiden_size": 8}, "text_config": {"vocab_size": 50}})");
  llava::LlavaConfig::from_json_file(dir / "typo.json", &report);
  DOCTEST_CHECK(report.unknown_keys == std::vector<std::string>{"vision_config.hiden_size"});
  tracetorch_test::write_text(dir / "wrong.json", R"({"vision_config": {"hidden_size": "sixteen"}})");
  DOCTEST_CHECK_THROWS_WITH_AS(llava::LlavaConfig::from_json_file(dir / "wrong.json"),
                               doctest::Contains("\"vision_config.hidden_size\" must be an integer"), tracetorch::Error);
  // Upstream's attribute_map: image_token_id is image_token_index.
  tracetorch_test::write_text(dir / "id.json", R"({"image_token_id": 5})");
  DOCTEST_CHECK(llava::LlavaConfig::from_json_file(dir / "id.json", &report).image_token_index == 5);
  DOCTEST_CHECK(report.unknown_keys.empty());
  tracetorch_test::write_text(dir / "rope.json", R"({"text_config": {"rope_parameters": {"rope_type": "yarn"}}})");
  DOCTEST_CHECK_THROWS_WITH_AS(llava::LlavaConfig::from_json_file(dir / "rope.json"), doctest::Contains("yarn"), tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE("llava")
