// examples/gpt2: the GPT-2 port on transformers' conventions, traced against the Python reference
// of tests/data/gpt2/make_gpt2_fixture.py.

#include <doctest/doctest.h>

#include "gpt2_fixture.hpp"

#include <tracetorch/config_file.hpp>

#include <algorithm>
#include <set>
#include <utility>

namespace {

using gpt2_test::fixture_ids;
using gpt2_test::fixture_model;
using gpt2_test::gpt2_dir;

using tracetorch_test::file_names;

}  // namespace

DOCTEST_TEST_SUITE("gpt2") {

DOCTEST_TEST_CASE("gpt2: the port's trace equals the upstream-convention reference (tests/data/gpt2), both kinds") {
  auto model = fixture_model();
  const auto ids = fixture_ids();
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(
        model, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    model({.input_ids = ids});
  }
  DOCTEST_CHECK(tracetorch_test::expect_trace_matches_reference(dir.path(), gpt2_dir(), "GPT2Model") == 60);
  DOCTEST_CHECK(file_names(dir / "st") == file_names(gpt2_dir() / "trace_st"));
}

DOCTEST_TEST_CASE("gpt2: upstream's state-dict names - the causal-mask buffers are non-persistent") {
  auto model = fixture_model();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tracetorch::nn::state_dict(*model)) names.push_back(name);
  DOCTEST_CHECK(names.size() == 28);  // as Python's GPT2Model(config).state_dict() for 2 layers
  DOCTEST_CHECK(names.front() == "wte.weight");
  DOCTEST_CHECK(names[4] == "h.0.attn.c_attn.weight");
  DOCTEST_CHECK(names.back() == "ln_f.bias");
  std::set<std::string> buffers;
  for (const auto& item : model->named_buffers()) buffers.insert(item.key());
  DOCTEST_CHECK(buffers.count("h.0.attn.bias") == 1);
  DOCTEST_CHECK(buffers.count("h.1.attn.masked_bias") == 1);
  DOCTEST_CHECK(model->h[0]->as<gpt2::GPT2Block>()->attn->c_attn->weight.sizes() == torch::IntArrayRef({8, 24}));
}

DOCTEST_TEST_CASE("gpt2: past_key_values of a first call continue the sequence as the whole forward does") {
  auto model = fixture_model();
  torch::NoGradGuard no_grad;
  const auto ids = fixture_ids();
  using torch::indexing::Slice;
  const auto whole = model({.input_ids = ids, .output_attentions = true, .output_hidden_states = true});
  DOCTEST_REQUIRE(whole.past_key_values.has_value());
  DOCTEST_CHECK(whole.past_key_values->size() == 2);
  DOCTEST_CHECK(std::get<0>(whole.past_key_values->at(0)).sizes() == torch::IntArrayRef({2, 2, 5, 4}));
  DOCTEST_CHECK(whole.hidden_states->size() == 3);
  DOCTEST_CHECK(whole.attentions->at(1).sizes() == torch::IntArrayRef({2, 2, 5, 5}));
  DOCTEST_CHECK_FALSE(whole.cross_attentions.has_value());

  const auto first = model({.input_ids = ids.index({Slice(), Slice(0, 3)})});
  const auto rest = model({.input_ids = ids.index({Slice(), Slice(3, 5)}), .past_key_values = *first.past_key_values});
  DOCTEST_CHECK(torch::allclose(rest.last_hidden_state, whole.last_hidden_state.index({Slice(), Slice(3, 5)}), 0, 1e-5));
  DOCTEST_CHECK(std::get<1>(rest.past_key_values->at(1)).size(-2) == 5);

  // A padding mask [batch, kv] of ones changes nothing; masking row 0's last token changes only
  // row 0's last position (the earlier ones never attend to it under the causal mask).
  const auto ones = torch::ones({2, 5}, torch::kInt64);
  DOCTEST_CHECK(torch::equal(model({.input_ids = ids, .attention_mask = ones}).last_hidden_state, whole.last_hidden_state));
  auto padded = ones.clone();
  padded.index_put_({0, 4}, 0);
  const auto masked = model({.input_ids = ids, .attention_mask = padded}).last_hidden_state;
  DOCTEST_CHECK(torch::equal(masked.index({Slice(), Slice(0, 4)}), whole.last_hidden_state.index({Slice(), Slice(0, 4)})));
  DOCTEST_CHECK(torch::equal(masked[1], whole.last_hidden_state[1]));
  DOCTEST_CHECK_FALSE(torch::allclose(masked.index({0, 4}), whole.last_hidden_state.index({0, 4})));

  const auto no_cache = model({.input_ids = ids, .use_cache = false});
  DOCTEST_CHECK_FALSE(no_cache.past_key_values.has_value());
  DOCTEST_CHECK_THROWS_AS(gpt2::GPT2Config::from_json_file(tracetorch_test::data_dir() / "no_such_config.json"), tracetorch::Error);
}

DOCTEST_TEST_CASE("gpt2: a config.json with upstream's attribute_map spellings (hidden_size, num_hidden_layers, ...) reads as n_embd, n_layer, ...") {
  // GPT2Config(hidden_size=8) sets n_embd in Python: a config written with the common names must
  // build the fixture's model, weights and all, not the 768-wide default.
  auto json = tracetorch_test::read_json(gpt2_dir() / "config.json").as_object();
  for (const auto& [common, own] : {std::pair{"hidden_size", "n_embd"}, std::pair{"num_hidden_layers", "n_layer"},
                                    std::pair{"num_attention_heads", "n_head"}, std::pair{"max_position_embeddings", "n_positions"}}) {
    json[common] = json.at(own);
    json.erase(own);
  }
  tracetorch_test::TempDir dir;
  tracetorch_test::write_text(dir / "config.json", boost::json::serialize(json));
  tracetorch::ConfigReport report;
  const auto config = tracetorch::load_config<gpt2::GPT2Config>(dir / "config.json", &report);
  DOCTEST_CHECK(tracetorch::config_to_json(config) ==
                tracetorch::config_to_json(gpt2::GPT2Config::from_json_file(gpt2_dir() / "config.json")));
  DOCTEST_CHECK(std::find(report.unknown_keys.begin(), report.unknown_keys.end(), "hidden_size") == report.unknown_keys.end());
  gpt2::GPT2Model model(gpt2::GPT2Config::from_json_file(dir / "config.json"));
  gpt2::load_state_dict(*model, gpt2_dir() / "model.safetensors");  // strict: refuses any other size
  model->eval();
  DOCTEST_CHECK(torch::equal(model({.input_ids = fixture_ids()}).last_hidden_state,
                             fixture_model()({.input_ids = fixture_ids()}).last_hidden_state));
  // Both spellings with different values: refused, naming both.
  json["n_embd"] = 16;
  tracetorch_test::write_text(dir / "both.json", boost::json::serialize(json));
  DOCTEST_CHECK_THROWS_WITH_AS(gpt2::GPT2Config::from_json_file(dir / "both.json"),
                               doctest::Contains("\"hidden_size\" and \"n_embd\" name the same field, with different values (8 and 16)"),
                               tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE
