// examples/qwen2_moe (transformers' Qwen2MoeModel at 0233e509 on <tracetorch/models.hpp>) traced
// and captured against the Python reference's bundle tests/data/qwen2_moe
// (make_qwen2moe_fixture.py, its defaults: seed 11, batch 2, seq 7).

#include <doctest/doctest.h>

#include <qwen2_moe/qwen2_moe.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

#include <regex>

namespace qwen2_moe_trace_test {

std::filesystem::path bundle() { return tracetorch_test::data_dir() / "qwen2_moe"; }

qwen2_moe::Qwen2MoeModel fixture_model() {
  qwen2_moe::Qwen2MoeModel model(qwen2_moe::Qwen2MoeConfig::from_json_file(bundle() / "config.json"));
  qwen2_moe::load_state_dict(*model, bundle() / "model.safetensors");
  model->eval();
  return model;
}

torch::Tensor fixture_ids() { return tracetorch::safetensors::load_single(bundle() / "input_ids.safetensors", "input_ids"); }

/// Python's `model(input_ids=ids, use_cache=False, output_router_logits=True)`.
tracetorch::OutputOptions nocache_call() {
  return tracetorch::output_options({{"use_cache", false}, {"output_router_logits", true}});
}

/// tracetorch names a module's later calls' files `<path>_call<N>_...`; transformers reuses the
/// first call's name. With those suffixes dropped, the JSON must be Python's byte for byte.
std::string without_call_suffixes(const std::string& text) {
  static const std::regex call_suffix(R"(_call[0-9]+_)");
  return std::regex_replace(text, call_suffix, "_");
}

/// Our file holding the same call as Python's `name`: for a repeated call's file (Python keeps
/// the last call's tensors) ours of the last call, `_call<N>_` with the largest N.
std::filesystem::path our_file_for(const std::filesystem::path& ours, const std::string& name) {
  std::string best = name;
  int best_call = 1;
  for (const auto& candidate : tracetorch_test::file_names(ours)) {
    const auto at = candidate.find("_call");
    if (at == std::string::npos) continue;
    const auto after = candidate.find('_', at + 5);
    if (after == std::string::npos || candidate.substr(0, at) + candidate.substr(after) != name) continue;
    const int call = std::stoi(candidate.substr(at + 5, after - at - 5));
    if (call > best_call) best_call = call, best = candidate;
  }
  return ours / best;
}

/// Both kinds of one call against the bundle's `trace_<prefix>_repr` / `_st`.
void expect_matches_reference(const std::filesystem::path& ours, const std::string& prefix) {
  const auto reference = [&](const std::string& kind) { return bundle() / (prefix + "_" + kind); };
  for (const std::string kind : {"repr", "st"}) {
    const auto diff = tracetorch_test::run_diff(reference(kind).string() + " " + (ours / kind).string());
    DOCTEST_CHECK_MESSAGE(diff.exit_code == 0, prefix << " " << kind << ":\n" << diff.output);
    if (kind == "st") DOCTEST_CHECK_MESSAGE(tracetorch_test::contains(diff.output, "overwritten"), diff.output);
  }
  for (const std::string file : {"SUMMARY", "FULL_TENSORS"}) {
    const std::string name = "Qwen2MoeModel_debug_tree_" + file + ".json";
    DOCTEST_INFO(prefix, " ", name);
    DOCTEST_CHECK(tracetorch_test::read_file(ours / "repr" / name) == tracetorch_test::read_file(reference("repr") / name));
    const auto st = tracetorch_test::read_file(ours / "st" / name);
    DOCTEST_CHECK(without_call_suffixes(st) == tracetorch_test::read_file(reference("st") / name));
  }
  std::size_t repeated = 0;
  for (const auto& name : tracetorch_test::file_names(reference("st"))) {
    if (!name.ends_with(".safetensors")) continue;
    const auto mine = our_file_for(ours / "st", name);
    repeated += mine.filename() != name;
    DOCTEST_INFO(prefix, " ", name, " against ", mine.filename().string());
    DOCTEST_CHECK(tracetorch_test::read_file(mine) == tracetorch_test::read_file(reference("st") / name));
  }
  DOCTEST_CHECK(repeated == 4);  // experts.act_fn of layers 0 and 2, inputs and outputs
}

}  // namespace qwen2_moe_trace_test

DOCTEST_TEST_SUITE("qwen2_moe") {

using namespace qwen2_moe_trace_test;

DOCTEST_TEST_CASE("qwen2_moe: both calls' traces equal the reference's (tests/data/qwen2_moe), both kinds, byte for byte") {
  auto model = fixture_model();
  const auto ids = fixture_ids();
  tracetorch_test::TempDir dir;
  for (const std::string prefix : {"trace", "trace_nocache"}) {
    for (const std::string kind : {"repr", "st"}) {
      auto guard = tracetorch::model_addition_debugger(
          model, {.debug_path = dir / prefix / kind, .do_prune_layers = false, .use_repr = kind == "repr"});
      DOCTEST_CHECK(guard.untraced_modules().empty());
      const auto out = prefix == "trace" ? model({.input_ids = ids}) : model({.input_ids = ids}, nocache_call());
      DOCTEST_CHECK(guard.modules_not_called().empty());
      DOCTEST_CHECK((out.past_key_values != nullptr) == (prefix == "trace"));
      DOCTEST_CHECK(out.router_logits.has_value() == (prefix == "trace_nocache"));
    }
    expect_matches_reference(dir / prefix, prefix);
  }
  // The flag handed on as upstream's **kwargs: recorded at every layer and self_attn.
  const auto summary = tracetorch_test::read_file(dir / "trace_nocache" / "repr" / "Qwen2MoeModel_debug_tree_SUMMARY.json");
  std::size_t handed_on = 0;
  for (auto at = summary.find("\"output_router_logits\": \"True\""); at != std::string::npos;
       at = summary.find("\"output_router_logits\": \"True\"", at + 1)) {
    ++handed_on;
  }
  DOCTEST_CHECK(handed_on == 1 + 2 * 3);  // the root, then each of 3 layers and its self_attn
}

DOCTEST_TEST_CASE("qwen2_moe: router_logits, hidden_states and attentions captured bit for bit, in upstream's to_tuple order") {
  auto model = fixture_model();
  const auto out = model({.input_ids = fixture_ids()},
                         tracetorch::output_options({{"use_cache", false},
                                                     {"output_hidden_states", true},
                                                     {"output_attentions", true},
                                                     {"output_router_logits", true}}));
  const auto captured = tracetorch::safetensors::load(bundle() / "captured.safetensors");
  const auto expected = tracetorch_test::read_json(bundle() / "captured.json");
  DOCTEST_CHECK(torch::equal(out.last_hidden_state, captured.at("last_hidden_state")));
  const std::pair<const char*, const std::optional<std::vector<torch::Tensor>>*> keys[] = {
      {"router_logits", &out.router_logits}, {"hidden_states", &out.hidden_states}, {"attentions", &out.attentions}};
  for (const auto& [key, tensors] : keys) {
    DOCTEST_INFO(key);
    DOCTEST_REQUIRE(tensors->has_value());
    DOCTEST_REQUIRE((*tensors)->size() == static_cast<std::size_t>(expected.at("lengths").at(key).as_int64()));
    for (std::size_t i = 0; i < (*tensors)->size(); ++i) {
      DOCTEST_CHECK(torch::equal((**tensors)[i], captured.at(std::string(key) + "_" + std::to_string(i))));
    }
  }
  // to_tuple in capture order: last_hidden_state, router_logits, hidden_states, attentions.
  const auto tuple = tracetorch::to_tuple(out, *model);
  DOCTEST_REQUIRE(tuple.size() == expected.at("to_tuple_order").as_array().size());
  DOCTEST_CHECK(torch::equal(tuple[1].toTensorVector()[0], captured.at("router_logits_0")));
  DOCTEST_CHECK(torch::equal(tuple[2].toTensorVector()[0], captured.at("hidden_states_0")));

  // output_router_logits from the config when the call does not say.
  auto config = qwen2_moe::Qwen2MoeConfig::from_json_file(bundle() / "config.json");
  config.output_router_logits = true;
  qwen2_moe::Qwen2MoeModel configured(config);
  qwen2_moe::load_state_dict(*configured, bundle() / "model.safetensors");
  const auto by_config = configured({.input_ids = fixture_ids()});
  DOCTEST_REQUIRE(by_config.router_logits.has_value());
  DOCTEST_CHECK(torch::equal((*by_config.router_logits)[1], captured.at("router_logits_1")));
  DOCTEST_CHECK_FALSE(by_config.hidden_states.has_value());
}

DOCTEST_TEST_CASE("qwen2_moe: the config read with rope_parameters nested, mlp_only_layers, unknown keys reported, errors naming the key") {
  tracetorch::ConfigReport report;
  const auto config = qwen2_moe::Qwen2MoeConfig::from_json_file(bundle() / "config.json", &report);
  DOCTEST_CHECK(config.rope_parameters.rope_theta == 10000.0);
  DOCTEST_CHECK(config.mlp_only_layers == std::vector<std::int64_t>{1});
  DOCTEST_CHECK(report.unknown_keys.empty());
  qwen2_moe::Qwen2MoeModel model(config);
  auto* layer1 = model->layers[1]->as<qwen2_moe::Qwen2MoeDecoderLayer>();
  auto* layer2 = model->layers[2]->as<qwen2_moe::Qwen2MoeDecoderLayer>();
  DOCTEST_CHECK(layer1->mlp.ptr()->as<qwen2_moe::Qwen2MoeMLP>() != nullptr);
  DOCTEST_CHECK(layer2->mlp.ptr()->as<qwen2_moe::Qwen2MoeSparseMoeBlock>() != nullptr);
  DOCTEST_CHECK(layer2->self_attn->q_proj->bias.defined());
  DOCTEST_CHECK_FALSE(layer2->self_attn->o_proj->bias.defined());

  tracetorch_test::TempDir dir;
  tracetorch_test::write_text(dir / "typed.json", R"({"rope_parameters": {"rope_type": "default", "rope_theta": "big"}, "extra_key": 1})");
  DOCTEST_CHECK_THROWS_WITH_AS(qwen2_moe::Qwen2MoeConfig::from_json_file(dir / "typed.json"),
                               doctest::Contains("\"rope_parameters.rope_theta\""), tracetorch::Error);
  tracetorch_test::write_text(dir / "yarn.json", R"({"rope_parameters": {"rope_type": "yarn"}, "extra_key": 1})");
  DOCTEST_CHECK_THROWS_WITH_AS(qwen2_moe::Qwen2MoeConfig::from_json_file(dir / "yarn.json"),
                               doctest::Contains("rope_type \"yarn\" is not ported"), tracetorch::Error);
  tracetorch_test::write_text(dir / "extra.json", R"({"extra_key": 1, "rope_parameters": {"rope_theta": 5.0, "factor": 2}})");
  qwen2_moe::Qwen2MoeConfig::from_json_file(dir / "extra.json", &report);
  DOCTEST_CHECK(report.unknown_keys == std::vector<std::string>{"extra_key", "rope_parameters.factor"});
}

DOCTEST_TEST_CASE("qwen2_moe_trace on its fixture: the default call's traces equal the reference's; --call use_cache=False") {
  tracetorch_test::TempDir dir;
  const auto common = " --config " + (bundle() / "config.json").string() + " --weights " +
                      (bundle() / "model.safetensors").string() + " --input-ids " +
                      (bundle() / "input_ids.safetensors").string() + " --no-prune-layers";
  const auto repr = tracetorch_test::run_program(TRACETORCH_QWEN2_MOE_TRACE, common + " --debug-path " + (dir / "repr").string());
  DOCTEST_REQUIRE_MESSAGE(repr.exit_code == 0, repr.output);
  const std::string summary = "Qwen2MoeModel_debug_tree_SUMMARY.json", full = "Qwen2MoeModel_debug_tree_FULL_TENSORS.json";
  DOCTEST_CHECK(tracetorch_test::read_file(dir / "repr" / summary) == tracetorch_test::read_file(bundle() / "trace_repr" / summary));
  DOCTEST_CHECK(tracetorch_test::read_file(dir / "repr" / full) == tracetorch_test::read_file(bundle() / "trace_repr" / full));
  const auto st = tracetorch_test::run_program(TRACETORCH_QWEN2_MOE_TRACE,
                                               common + " --safetensors --call use_cache=False --debug-path " + (dir / "st").string());
  DOCTEST_REQUIRE_MESSAGE(st.exit_code == 0, st.output);
  const auto recorded = tracetorch_test::read_json(dir / "st" / summary);
  DOCTEST_CHECK(recorded.at("inputs").at("kwargs").at("use_cache").as_string() == "False");
}

DOCTEST_TEST_CASE("qwen2_moe_trace --call output_router_logits=True: the second call's trace and capture as the reference's; a misspelt key refused") {
  tracetorch_test::TempDir dir;
  const auto common = " --config " + (bundle() / "config.json").string() + " --weights " +
                      (bundle() / "model.safetensors").string() + " --input-ids " +
                      (bundle() / "input_ids.safetensors").string() + " --no-prune-layers --call use_cache=False";
  // Python's `model(input_ids=ids, use_cache=False, output_router_logits=True)`, printed kind.
  const auto traced = tracetorch_test::run_program(TRACETORCH_QWEN2_MOE_TRACE,
                                                   common + " --call output_router_logits=True --debug-path " + (dir / "repr").string());
  DOCTEST_REQUIRE_MESSAGE(traced.exit_code == 0, traced.output);
  const std::string summary = "Qwen2MoeModel_debug_tree_SUMMARY.json";
  DOCTEST_CHECK(tracetorch_test::read_file(dir / "repr" / summary) ==
                tracetorch_test::read_file(bundle() / "trace_nocache_repr" / summary));

  // captured.json's call, flags in its order; every captured tensor bit for bit under the bundle's name.
  const auto captured = tracetorch_test::run_program(
      TRACETORCH_QWEN2_MOE_TRACE, common + " --call output_hidden_states=True --call output_attentions=True --call output_router_logits=True"
                                           " --dump-captured " + (dir / "captured").string() + " --debug-path " + (dir / "trace").string());
  DOCTEST_REQUIRE_MESSAGE(captured.exit_code == 0, captured.output);
  const tracetorch::safetensors::Reader expected(bundle() / "captured.safetensors");
  std::size_t compared = 0;
  for (const auto& info : expected.header().tensors) {
    const auto& name = info.name;
    DOCTEST_INFO(name);
    const auto mine = tracetorch::safetensors::load_single(dir / "captured" / (name + ".safetensors"), "data");
    DOCTEST_CHECK(torch::equal(mine, expected.load(name)));
    ++compared;
  }
  DOCTEST_CHECK(compared == 10);  // last_hidden_state, 2 router_logits, 4 hidden_states, 3 attentions
  DOCTEST_CHECK(!std::filesystem::exists(dir / "captured" / "router_logits_2.safetensors"));

  const auto misspelt = tracetorch_test::run_program(TRACETORCH_QWEN2_MOE_TRACE,
                                                     common + " --call output_router_logitz=True --debug-path " + (dir / "bad").string());
  DOCTEST_CHECK(misspelt.exit_code == 2);  // refused before any work, the names the call takes listed
  DOCTEST_CHECK(misspelt.output.find("output_router_logitz") != std::string::npos);
  DOCTEST_CHECK(misspelt.output.find("output_attentions, output_router_logits, use_cache") != std::string::npos);
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "bad"));
}

}  // DOCTEST_TEST_SUITE("qwen2_moe")
