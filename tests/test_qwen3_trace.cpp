// examples/qwen3 (transformers' Qwen3Model at 000c33fd on <tracetorch/models.hpp>) traced against
// the Python reference's bundle tests/data/qwen3 (make_qwen3_fixture.py --batch 2 --seq 4).

#include <doctest/doctest.h>

#include <qwen3/qwen3.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace qwen3_trace_test {

std::filesystem::path qwen3_dir() { return tracetorch_test::data_dir() / "qwen3"; }

qwen3::Qwen3Model fixture_model() {
  qwen3::Qwen3Model model(qwen3::Qwen3Config::from_json_file(qwen3_dir() / "config.json"));
  qwen3::load_state_dict(*model, qwen3_dir() / "model.safetensors");
  model->eval();
  return model;
}

}  // namespace qwen3_trace_test

DOCTEST_TEST_SUITE("qwen3") {

DOCTEST_TEST_CASE("qwen3: the port's trace equals the reference's (tests/data/qwen3), both kinds, byte for byte") {
  using qwen3_trace_test::qwen3_dir;
  auto model = qwen3_trace_test::fixture_model();
  const auto ids = tracetorch::safetensors::load_single(qwen3_dir() / "input_ids.safetensors", "input_ids");
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    const auto out = model({.input_ids = ids});  // Python: model(input_ids=ids)
    DOCTEST_CHECK(guard.modules_not_called().empty());
    DOCTEST_REQUIRE(out.past_key_values != nullptr);  // use_cache from the config
  }
  const auto compared = tracetorch_test::expect_trace_matches_reference(dir.path(), qwen3_dir(), "Qwen3Model");
  DOCTEST_CHECK(compared == tracetorch_test::count_files(qwen3_dir() / "trace_st") - 2);
  tracetorch_test::expect_trace_files_identical(dir.path(), qwen3_dir());
  // Qwen3's own module: each attention normalises q and k per head, between projection and rotation.
  const auto summary = tracetorch_test::read_file(dir / "repr" / "Qwen3Model_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(summary.find("\"Qwen3Model.layers.3.self_attn.k_norm\"") != std::string::npos);
}

DOCTEST_TEST_CASE("qwen3: use_cache=False leaves past_key_values out; the config's errors name the key") {
  auto model = qwen3_trace_test::fixture_model();
  const auto ids = tracetorch::safetensors::load_single(qwen3_trace_test::qwen3_dir() / "input_ids.safetensors", "input_ids");
  const auto cached = model({.input_ids = ids});
  const auto uncached = model({.input_ids = ids}, {.use_cache = false});
  DOCTEST_CHECK(uncached.past_key_values == nullptr);
  DOCTEST_CHECK(torch::equal(cached.last_hidden_state, uncached.last_hidden_state));
  tracetorch_test::TempDir dir;
  std::ofstream(dir / "config.json") << R"({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3})";
  DOCTEST_CHECK_THROWS_WITH_AS(qwen3::Qwen3Config::from_json_file(dir / "config.json"),
                               doctest::Contains("num_attention_heads is not a multiple of num_key_value_heads"), tracetorch::Error);
  std::ofstream(dir / "rope.json") << R"({"rope_scaling": {"rope_type": "yarn"}})";
  DOCTEST_CHECK_THROWS_WITH_AS(qwen3::Qwen3Config::from_json_file(dir / "rope.json"), doctest::Contains("rope_scaling"), tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE("qwen3")
