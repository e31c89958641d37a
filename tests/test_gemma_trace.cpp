// examples/gemma: the Gemma port on transformers' conventions (GemmaModel at c4cdd1a0), traced
// against the Python reference of tests/data/gemma/make_gemma_fixture.py, its sharded bfloat16
// checkpoint loaded into the float32 port.

#include <doctest/doctest.h>

#include "gemma_fixture.hpp"

#include <limits>
#include <set>

namespace {

/// The index's weight_map names, sorted.
std::set<std::string> gemma_index_names() {
  std::set<std::string> names;
  const auto index = tracetorch_test::read_json(gemma_test::gemma_dir() / "model.safetensors.index.json");
  for (const auto& entry : index.at("weight_map").as_object()) names.emplace(entry.key());
  return names;
}

}  // namespace

DOCTEST_TEST_SUITE("gemma") {

DOCTEST_TEST_CASE("gemma: the port's trace equals the upstream-convention reference (tests/data/gemma), both kinds") {
  auto model = gemma_test::fixture_model();
  const auto ids = gemma_test::fixture_ids();
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(
        model, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    model({.input_ids = ids, .use_cache = false});
    DOCTEST_CHECK(guard.modules_not_called().empty());
  }
  const auto compared = tracetorch_test::expect_trace_matches_reference(dir.path(), gemma_test::gemma_dir(), "GemmaModel");
  DOCTEST_CHECK(compared == tracetorch_test::count_files(gemma_test::gemma_dir() / "trace_st") - 2);  // all but the two JSON files
  // 23 leaf calls' inputs and outputs (48 files), the layers', attentions' and MLPs' inputs (26), the root's two
  DOCTEST_CHECK(compared == 76);
  DOCTEST_CHECK(tracetorch_test::file_names(dir / "st") == tracetorch_test::file_names(gemma_test::gemma_dir() / "trace_st"));
  // Beyond the helper's 1e-5: the same operations in the same order give the same bits, and
  // every file (each tensor's, the four JSON files) is the reference's byte for byte.
  std::size_t identical = 0;
  for (const auto& name : tracetorch_test::file_names(gemma_test::gemma_dir() / "trace_st")) {
    DOCTEST_INFO(name);
    const bool same = tracetorch_test::read_file(dir / "st" / name) == tracetorch_test::read_file(gemma_test::gemma_dir() / "trace_st" / name);
    DOCTEST_CHECK(same);
    identical += same && name.ends_with(".safetensors") ? 1 : 0;
  }
  DOCTEST_CHECK(identical == compared);
  for (const std::string file : {"SUMMARY", "FULL_TENSORS"}) {
    const std::string name = "GemmaModel_debug_tree_" + file + ".json";
    DOCTEST_CHECK(tracetorch_test::read_file(dir / "repr" / name) == tracetorch_test::read_file(gemma_test::gemma_dir() / "trace_repr" / name));
  }
}

DOCTEST_TEST_CASE("gemma: the default call (use_cache from the config) traces the era's cache as Python does, byte for byte") {
  auto model = gemma_test::fixture_model();
  DOCTEST_REQUIRE(model->config.use_cache);
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    const auto out = model({.input_ids = gemma_test::fixture_ids()});  // Python: model(input_ids=ids)
    DOCTEST_REQUIRE(out.past_key_values != nullptr);
    DOCTEST_CHECK(out.past_key_values->get_seq_length() == 5);
  }
  const auto reference = gemma_test::gemma_dir() / "trace_use_cache";
  for (const std::string file : {"SUMMARY", "FULL_TENSORS"}) {
    const std::string name = "GemmaModel_debug_tree_" + file + ".json";
    const std::string ours = tracetorch_test::read_file(dir / name);
    DOCTEST_CHECK(ours == tracetorch_test::read_file(reference / name));
    // Each layer and each attention got the cache: that era's object repr, the address masked.
    std::size_t caches = 0;
    for (auto at = ours.find("<transformers.cache_utils.DynamicCache object at 0xXXXXXXXX>"); at != std::string::npos;
         at = ours.find("<transformers.cache_utils.DynamicCache object at 0xXXXXXXXX>", at + 1)) {
      ++caches;
    }
    DOCTEST_CHECK(caches == 4);
  }
#ifdef TRACETORCH_DIFF
  const auto diff = tracetorch_test::run_program(TRACETORCH_DIFF, reference.string() + " " + dir.path().string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 0);
#endif
}

DOCTEST_TEST_CASE("gemma: the sharded bfloat16 checkpoint loads every tensor, each converted BFloat16 -> Float") {
  gemma::GemmaModel model(gemma::GemmaConfig::from_json_file(gemma_test::gemma_dir() / "config.json"));
  const auto before = model->norm->weight.clone();
  // DtypePolicy::keep refuses the first bf16 tensor and leaves the model as it was.
  DOCTEST_CHECK_THROWS_WITH_AS(
      gemma::load_state_dict(*model, gemma_test::gemma_dir() / "model.safetensors.index.json", tracetorch::checkpoint::DtypePolicy::keep),
      doctest::Contains("BFloat16"), tracetorch::Error);
  DOCTEST_CHECK(torch::equal(model->norm->weight, before));

  const auto report = gemma::load_state_dict(*model, gemma_test::gemma_dir());  // the folder: its index, two shards
  const auto names = gemma_index_names();
  DOCTEST_CHECK(report.loaded == names.size());
  DOCTEST_CHECK(report.converted.size() == names.size());
  std::set<std::string> converted;
  for (const auto& conversion : report.converted) {
    DOCTEST_INFO(conversion.name);
    DOCTEST_CHECK((conversion.from == torch::kBFloat16));
    DOCTEST_CHECK((conversion.to == torch::kFloat32));
    converted.insert(conversion.name);
  }
  DOCTEST_CHECK(converted == names);
  DOCTEST_CHECK(report.missing_keys.empty());
  DOCTEST_CHECK(report.unexpected_keys.empty());
  // Values are the bf16 values widened: norm.weight lies in the second shard.
  const auto shard = tracetorch::safetensors::load(gemma_test::gemma_dir() / "model-00002-of-00002.safetensors");
  DOCTEST_CHECK(torch::equal(model->norm->weight, shard.at("norm.weight").to(torch::kFloat32)));
  DOCTEST_CHECK((model->norm->weight.scalar_type() == torch::kFloat32));
}

DOCTEST_TEST_CASE("gemma: upstream's state-dict names - the rotary inv_freq is a non-persistent buffer") {
  auto model = gemma_test::fixture_model();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tracetorch::nn::state_dict(*model)) names.push_back(name);
  DOCTEST_REQUIRE(names.size() == 20);  // as Python's GemmaModel(config).state_dict() for 2 layers
  DOCTEST_CHECK(names.front() == "embed_tokens.weight");
  DOCTEST_CHECK(names[1] == "layers.0.self_attn.q_proj.weight");
  DOCTEST_CHECK(names[5] == "layers.0.mlp.gate_proj.weight");
  DOCTEST_CHECK(names[8] == "layers.0.input_layernorm.weight");
  DOCTEST_CHECK(names[9] == "layers.0.post_attention_layernorm.weight");
  DOCTEST_CHECK(names.back() == "norm.weight");
  DOCTEST_CHECK(std::set<std::string>(names.begin(), names.end()) == gemma_index_names());
  std::set<std::string> buffers;
  for (const auto& item : model->named_buffers()) buffers.insert(item.key());
  DOCTEST_CHECK(buffers == std::set<std::string>{"rotary_emb.inv_freq"});
  // head_dim 12 from the config (hidden 16 / 2 heads would be 8), one key/value head.
  const auto& attention = model->layers[0]->as<gemma::GemmaDecoderLayer>()->self_attn;
  DOCTEST_CHECK(attention->q_proj->weight.sizes() == torch::IntArrayRef({24, 16}));
  DOCTEST_CHECK(attention->k_proj->weight.sizes() == torch::IntArrayRef({12, 16}));
  DOCTEST_CHECK(model->rotary_emb->inv_freq.sizes() == torch::IntArrayRef({6}));
}

DOCTEST_TEST_CASE("gemma capture: output_hidden_states and output_attentions equal the reference's bit for bit") {
  auto model = gemma_test::fixture_model();
  const auto ids = gemma_test::fixture_ids();
  const auto layers = model->config.num_hidden_layers;
  const auto out = model({.input_ids = ids, .use_cache = false, .output_attentions = true, .output_hidden_states = true});
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_CHECK(out.hidden_states->size() == static_cast<std::size_t>(layers + 1));
  DOCTEST_CHECK(out.attentions->size() == static_cast<std::size_t>(layers));
  DOCTEST_CHECK_FALSE(out.past_key_values);
  const auto reference = tracetorch::safetensors::load(gemma_test::gemma_dir() / "capture.safetensors");
  for (std::size_t i = 0; i < out.hidden_states->size(); ++i) {
    DOCTEST_INFO("hidden_states." << i);
    DOCTEST_CHECK(out.hidden_states->at(i).sizes() == torch::IntArrayRef({2, 5, 16}));
    DOCTEST_CHECK(torch::equal(out.hidden_states->at(i), reference.at("hidden_states." + std::to_string(i))));
  }
  for (std::size_t i = 0; i < out.attentions->size(); ++i) {
    DOCTEST_INFO("attentions." << i);
    DOCTEST_CHECK(out.attentions->at(i).sizes() == torch::IntArrayRef({2, 2, 5, 5}));  // [batch, heads, seq, seq]
    DOCTEST_CHECK(torch::equal(out.attentions->at(i), reference.at("attentions." + std::to_string(i))));
  }
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.last_hidden_state));
  // Asked for nothing (the config's flags are false), nothing comes back.
  const auto plain = model({.input_ids = ids, .use_cache = false});
  DOCTEST_CHECK_FALSE(plain.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(plain.attentions.has_value());
  DOCTEST_CHECK(torch::equal(plain.last_hidden_state, out.last_hidden_state));
}

DOCTEST_TEST_CASE("gemma: a cache continues the sequence, and a padding mask masks only its token") {
  auto model = gemma_test::fixture_model();
  torch::NoGradGuard no_grad;
  const auto ids = gemma_test::fixture_ids();
  using torch::indexing::Slice;
  const auto whole = model({.input_ids = ids, .use_cache = false}).last_hidden_state;
  const auto first = model({.input_ids = ids.index({Slice(), Slice(0, 3)})});  // the config's use_cache: true
  DOCTEST_REQUIRE(first.past_key_values);
  DOCTEST_CHECK(first.past_key_values->get_seq_length() == 3);
  const auto rest = model({.input_ids = ids.index({Slice(), Slice(3, 5)}), .past_key_values = first.past_key_values});
  DOCTEST_CHECK(rest.past_key_values->get_seq_length() == 5);
  DOCTEST_CHECK(torch::allclose(rest.last_hidden_state, whole.index({Slice(), Slice(3, 5)}), 0, 1e-5));

  const auto ones = torch::ones({2, 5}, torch::kInt64);
  DOCTEST_CHECK(torch::allclose(model({.input_ids = ids, .attention_mask = ones, .use_cache = false}).last_hidden_state, whole, 0, 1e-6));
  auto padded = ones.clone();
  padded.index_put_({0, 1}, 0);
  const auto masked = model({.input_ids = ids, .attention_mask = padded, .use_cache = false}).last_hidden_state;
  DOCTEST_CHECK(torch::allclose(masked[1], whole[1], 0, 1e-6));
  DOCTEST_CHECK(torch::allclose(masked.index({0, 0}), whole.index({0, 0}), 0, 1e-6));  // before the masked token
  DOCTEST_CHECK_FALSE(torch::allclose(masked.index({0, 4}), whole.index({0, 4})));
}

DOCTEST_TEST_CASE("gemma: the eager causal mask of that era is [batch, 1, seq, seq + 1]") {
  const auto input = torch::zeros({2, 3, 4});
  const auto mask = gemma::update_causal_mask(torch::Tensor(), input, torch::arange(3), 0);
  DOCTEST_CHECK(mask.sizes() == torch::IntArrayRef({2, 1, 3, 4}));
  const float lowest = std::numeric_limits<float>::lowest();
  const auto expected = torch::tensor({0.0f, lowest, lowest, lowest, 0.0f, 0.0f, lowest, lowest, 0.0f, 0.0f, 0.0f, lowest}).view({3, 4});
  DOCTEST_CHECK(torch::equal(mask[0][0], expected));
  DOCTEST_CHECK(torch::equal(mask[1][0], expected));
  // With two cached tokens: [1, 1, 1, 2 + 1 + 1], the query at position 2 sees keys 0..2.
  const auto step = gemma::update_causal_mask(torch::Tensor(), torch::zeros({1, 1, 4}), torch::tensor({2}), 2);
  DOCTEST_CHECK(torch::equal(step.view({4}), torch::tensor({0.0f, 0.0f, 0.0f, lowest})));
}

DOCTEST_TEST_CASE("gemma: config.json errors name the file and the key") {
  tracetorch_test::TempDir dir;
  const auto write_config = [&](const std::string& text) {
    tracetorch_test::write_text(dir / "config.json", text);
    return dir / "config.json";
  };
  DOCTEST_CHECK_THROWS_WITH_AS(gemma::GemmaConfig::from_json_file(write_config(R"({"rope_scaling": {"type": "linear"}})")),
                               doctest::Contains("\"rope_scaling\" must be null"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(gemma::GemmaConfig::from_json_file(write_config(R"({"head_dim": "12"})")),
                               doctest::Contains("\"head_dim\" must be an integer"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(gemma::GemmaConfig::from_json_file(write_config(R"({"hidden_act": "gelu_nonsense"})")),
                               doctest::Contains("gelu_nonsense"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(gemma::GemmaConfig::from_json_file(write_config(R"({"num_key_value_heads": 3})")),
                               doctest::Contains("multiple of num_key_value_heads"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(gemma::GemmaConfig::from_json_file(dir / "missing.json"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(gemma::GemmaConfig::from_json_file(dir.path()), tracetorch::Error);  // a directory
  // Keys left out take GemmaConfig's defaults (gemma-7b's head_dim 256), as upstream's.
  const auto defaults = gemma::GemmaConfig::from_json_file(write_config(R"({"hidden_size": 16, "hidden_activation": null})"));
  DOCTEST_CHECK(defaults.head_dim == 256);
  DOCTEST_CHECK(defaults.num_key_value_heads == 16);
  DOCTEST_CHECK(defaults.hidden_size == 16);
  const auto fixture = gemma::GemmaConfig::from_json_file(gemma_test::gemma_dir() / "config.json");
  DOCTEST_CHECK(fixture.head_dim == 12);
  DOCTEST_CHECK(fixture.hidden_act == "gelu_pytorch_tanh");
  DOCTEST_CHECK((fixture.pad_token_id == std::optional<std::int64_t>(0)));
}

}  // DOCTEST_TEST_SUITE
