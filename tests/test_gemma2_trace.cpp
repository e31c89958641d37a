// examples/gemma2 (transformers' Gemma2Model, 5.x, on <tracetorch/models.hpp>'s parts) traced
// against the Python reference's bundle tests/data/gemma2 (make_gemma2_fixture.py: 2 layers,
// sliding then full, a window of 4 over 9 tokens, query_pre_attn_scalar 24, soft-cap 50).

#include <doctest/doctest.h>

#include <gemma2/gemma2.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace gemma2_trace_test {

std::filesystem::path gemma2_dir() { return tracetorch_test::data_dir() / "gemma2"; }

gemma2::Gemma2Model fixture_model() {
  gemma2::Gemma2Model model(gemma2::Gemma2Config::from_json_file(gemma2_dir() / "config.json"));
  gemma2::load_state_dict(*model, gemma2_dir() / "model.safetensors");
  model->eval();
  return model;
}

torch::Tensor fixture_ids() {
  return tracetorch::safetensors::load_single(gemma2_dir() / "input_ids.safetensors", "input_ids");
}

}  // namespace gemma2_trace_test

DOCTEST_TEST_SUITE("gemma2") {

DOCTEST_TEST_CASE("gemma2: the port's trace equals the reference's (tests/data/gemma2), both kinds, byte for byte") {
  using gemma2_trace_test::gemma2_dir;
  auto model = gemma2_trace_test::fixture_model();
  const auto ids = gemma2_trace_test::fixture_ids();
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    const auto out = model({.input_ids = ids});  // Python: model(input_ids=ids)
    DOCTEST_CHECK(guard.modules_not_called().empty());
    DOCTEST_REQUIRE(out.past_key_values != nullptr);  // use_cache from the config
  }
  const auto compared = tracetorch_test::expect_trace_matches_reference(dir.path(), gemma2_dir(), "Gemma2Model");
  DOCTEST_CHECK(compared == tracetorch_test::count_files(gemma2_dir() / "trace_st") - 2);
  tracetorch_test::expect_trace_files_identical(dir.path(), gemma2_dir());
  // Gemma2's own steps show in the trace: the four norms, and the cache's sliding layer.
  const auto summary = tracetorch_test::read_file(dir / "repr" / "Gemma2Model_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(summary.find("\"Gemma2Model.layers.1.post_feedforward_layernorm\"") != std::string::npos);
  DOCTEST_CHECK(summary.find("DynamicCache(layers=[DynamicSlidingWindowLayer, DynamicLayer])") != std::string::npos);
}

DOCTEST_TEST_CASE("gemma2: the sliding layer's mask, the scale and the soft-cap each change the output") {
  auto model = gemma2_trace_test::fixture_model();
  const auto ids = gemma2_trace_test::fixture_ids();
  const auto reference = model({.input_ids = ids}).last_hidden_state;
  // Layer 0 is sliding (window 4 over 9 tokens): with the full mask its attention differs.
  DOCTEST_CHECK(model->config.layer_types == std::vector<std::string>{"sliding_attention", "full_attention"});
  const auto variant = [&](auto change) {
    auto c = model->config;
    change(c);
    gemma2::Gemma2Model other(c);
    gemma2::load_state_dict(*other, gemma2_trace_test::gemma2_dir() / "model.safetensors");
    other->eval();
    return other({.input_ids = ids}).last_hidden_state;
  };
  DOCTEST_CHECK(torch::equal(variant([](auto&) {}), reference));
  DOCTEST_CHECK_FALSE(torch::allclose(variant([](auto& c) { c.layer_types = {"full_attention", "full_attention"}; }), reference, 0, 1e-4));
  DOCTEST_CHECK_FALSE(torch::allclose(variant([](auto& c) { c.query_pre_attn_scalar = c.head_dim; }), reference, 0, 1e-4));
  DOCTEST_CHECK_FALSE(torch::allclose(variant([](auto& c) { c.attn_logit_softcapping.reset(); }), reference, 0, 1e-4));
  DOCTEST_CHECK_FALSE(torch::allclose(variant([](auto& c) { c.hidden_activation = "silu"; }), reference, 0, 1e-4));  // the MLP reads it
  // use_cache=False: no cache in the output, the same hidden states.
  const auto uncached = model({.input_ids = ids}, {.use_cache = false});
  DOCTEST_CHECK(uncached.past_key_values == nullptr);
  DOCTEST_CHECK(torch::equal(uncached.last_hidden_state, reference));
}

DOCTEST_TEST_CASE("gemma2: a second call on the first call's cache equals the whole forward's last position") {
  auto model = gemma2_trace_test::fixture_model();
  const auto ids = gemma2_trace_test::fixture_ids();
  const auto whole = model({.input_ids = ids}).last_hidden_state;
  const auto n = ids.size(1);
  const auto first = model({.input_ids = ids.slice(1, 0, n - 1)});
  // The sliding layer (window 4) kept the last 3 of the 8 tokens, the full layer all 8.
  DOCTEST_CHECK(first.past_key_values->get_seq_length() == n - 1);
  DOCTEST_CHECK(first.past_key_values->keys(0).size(-2) == 3);
  DOCTEST_CHECK(first.past_key_values->keys(1).size(-2) == n - 1);
  const auto second = model({.input_ids = ids.slice(1, n - 1, n), .past_key_values = first.past_key_values});
  DOCTEST_CHECK(torch::allclose(second.last_hidden_state, whole.slice(1, n - 1, n), 1e-5, 1e-5));
}

DOCTEST_TEST_CASE("gemma2: config.json's hidden_activation is read; layer_types derived as upstream, for any layer count; errors name the key") {
  tracetorch_test::TempDir dir;
  std::ofstream(dir / "config.json") << R"({"num_hidden_layers": 3, "hidden_activation": "gelu_new"})";
  const auto config = gemma2::Gemma2Config::from_json_file(dir / "config.json");
  DOCTEST_CHECK(config.hidden_activation == "gelu_new");
  // Derived by validate and stored, as Gemma2Config derives them: the shared model reads them.
  DOCTEST_CHECK(config.layer_types == std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention"});
  auto more = config;  // as --set layer_types=[] --set num_hidden_layers=5 after the read: derived again
  more.layer_types.clear();
  more.num_hidden_layers = 5;
  DOCTEST_CHECK_NOTHROW(more.validate("more"));
  DOCTEST_CHECK(more.layer_types.size() == 5);
  DOCTEST_CHECK(more.layer_types[4] == "sliding_attention");
  auto stale = config;  // the stored types no longer fit: refused, as upstream's layer_type_validation
  stale.num_hidden_layers = 5;
  DOCTEST_CHECK_THROWS_WITH_AS(stale.validate("stale"), doctest::Contains("layer_types must have one entry per layer"), tracetorch::Error);
  std::ofstream(dir / "heads.json") << R"({"num_attention_heads": 4, "num_key_value_heads": 3})";
  DOCTEST_CHECK_THROWS_WITH_AS(gemma2::Gemma2Config::from_json_file(dir / "heads.json"),
                               doctest::Contains("num_attention_heads is not a multiple of num_key_value_heads"), tracetorch::Error);
  std::ofstream(dir / "rope.json") << R"({"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0}})";
  DOCTEST_CHECK_THROWS_WITH_AS(gemma2::Gemma2Config::from_json_file(dir / "rope.json"), doctest::Contains("rope_type"), tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE("gemma2")
