// examples/llama rebuilt on <tracetorch/models.hpp>: a left-padded batch with its attention_mask,
// traced against upstream's LlamaModel (tests/data/tiny_llama_padded, made by
// make_upstream_fixture.py --pad 3 from tiny_llama_upstream's weights and ids).

#include <doctest/doctest.h>

#include <llama/llama.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace llama_padding_test {

std::filesystem::path padded_dir() { return tracetorch_test::data_dir() / "tiny_llama_padded"; }

/// Every file of `reference`'s trace_<kind> against `ours`/<kind>, byte for byte; the number equal.
std::size_t identical_files(const std::filesystem::path& ours, const std::filesystem::path& reference, const std::string& kind) {
  std::size_t identical = 0;
  for (const auto& name : tracetorch_test::file_names(reference / ("trace_" + kind))) {
    DOCTEST_INFO(kind, " ", name);
    const bool same = tracetorch_test::read_file(ours / kind / name) == tracetorch_test::read_file(reference / ("trace_" + kind) / name);
    DOCTEST_CHECK(same);
    identical += same ? 1 : 0;
  }
  return identical;
}

}  // namespace llama_padding_test

DOCTEST_TEST_SUITE("models") {

DOCTEST_TEST_CASE("models: Llama with a left-padded batch and its attention_mask traces as upstream's, both kinds, byte for byte") {
  using llama_padding_test::padded_dir;
  llama::LlamaModel model(llama::LlamaConfig::from_json_file(padded_dir() / "config.json"));
  llama::load_state_dict(*model, tracetorch_test::tiny_llama_dir() / "model.safetensors");  // the bundle's source weights
  model->eval();
  tracetorch::safetensors::Reader inputs(padded_dir() / "inputs.safetensors");
  const auto ids = inputs.load("input_ids"), mask = inputs.load("attention_mask");
  DOCTEST_REQUIRE(mask[1].slice(0, 0, 3).sum().item<std::int64_t>() == 0);  // the last sample is left-padded by 3
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
    const auto out = model({.input_ids = ids, .attention_mask = mask});  // Python: model(input_ids=ids, attention_mask=mask)
    DOCTEST_CHECK(guard.modules_not_called().empty());
    DOCTEST_CHECK(out.past_key_values->get_seq_length() == 7);
  }
  const auto compared = tracetorch_test::expect_trace_matches_reference(dir.path(), padded_dir(), "LlamaModel");
  DOCTEST_CHECK(compared == tracetorch_test::count_files(padded_dir() / "trace_st") - 2);
  DOCTEST_CHECK(tracetorch_test::file_names(dir / "st") == tracetorch_test::file_names(padded_dir() / "trace_st"));
  DOCTEST_CHECK(llama_padding_test::identical_files(dir.path(), padded_dir(), "repr") == 2);
  DOCTEST_CHECK(llama_padding_test::identical_files(dir.path(), padded_dir(), "st") == compared + 2);

  // The padding shows: the root records the mask, the layers get a mask whose padded keys hold
  // float32's minimum, and the padded sample's output differs from the same ids unpadded.
  const auto summary = tracetorch_test::read_json(dir / "repr" / "LlamaModel_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(summary.at("inputs").at("kwargs").as_object().contains("attention_mask"));
  const auto unpadded = model({.input_ids = ids}).last_hidden_state;
  const auto padded = model({.input_ids = ids, .attention_mask = mask}).last_hidden_state;
  DOCTEST_CHECK(torch::equal(unpadded[0], padded[0]));
  DOCTEST_CHECK_FALSE(torch::allclose(unpadded[1].slice(0, 3), padded[1].slice(0, 3)));
}

}  // DOCTEST_TEST_SUITE("models")
