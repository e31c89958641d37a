// tracetorch/replay.hpp and llama_trace --replay: every module judged on the reference's own
// inputs, so that two planted bugs in different modules both show as innermost diverging calls,
// where the plain diff names only the first.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <llama/llama.hpp>
#include <tracetorch/checkpoint.hpp>
#include <tracetorch/debugger.hpp>
#include <tracetorch/replay.hpp>

#include <set>

namespace program_replay_test {

llama::LlamaModel fixture_llama() {
  const auto dir = tracetorch_test::tiny_llama_dir();
  llama::LlamaModel model(llama::LlamaConfig::from_json_file(dir / "config.json"));
  tracetorch::checkpoint::load(*model, dir / "model.safetensors");
  model->eval();
  return model;
}

/// The port with two bugs planted on the C++ side: layer 2's post-attention norm epsilon, and the
/// rotary embedding's sign (negated frequencies: sin changes sign, cos does not).
void plant_bugs(llama::LlamaModel& model) {
  model->layers->ptr(2)->as<llama::LlamaDecoderLayer>()->post_attention_layernorm->variance_epsilon = 0.1;
  model->rotary_emb->inv_freq = -model->rotary_emb->inv_freq;
}

std::set<std::string> innermost(const tracetorch::ReplayReport& report) {
  std::set<std::string> out;
  for (const auto* call : report.innermost_diverging()) out.insert(call->path);
  return out;
}

}  // namespace program_replay_test

DOCTEST_TEST_SUITE("replay") {

DOCTEST_TEST_CASE("replay: the correct port matches its reference call by call") {
  auto model = program_replay_test::fixture_llama();
  const auto report = tracetorch::replay(model, tracetorch_test::tiny_llama_dir() / "trace_st");
  DOCTEST_INFO(tracetorch::replay_report_text(report, "LlamaModel"));
  // 1 root, embed_tokens, rotary_emb, norm, and per layer: the layer, 2 norms, attention + 4
  // projections, mlp + 4 (gate, up, act_fn, down).
  DOCTEST_CHECK(report.calls.size() == 4 + 4 * 13);
  DOCTEST_CHECK(report.count(tracetorch::ReplayStatus::match) == report.calls.size());
  // The attentions' recorded cache is replayed as an empty one: a first forward (cache_position from 0).
  const auto attention = std::find_if(report.calls.begin(), report.calls.end(),
                                      [](const auto& c) { return c.path == "LlamaModel.layers.1.self_attn"; });
  DOCTEST_REQUIRE(attention != report.calls.end());
  DOCTEST_CHECK(attention->note == "past_key_values: the recorded cache replayed as an empty one of the argument's kind (a first forward)");
}

DOCTEST_TEST_CASE("replay: bugs planted in the port, in two modules, both named innermost; the diff names only the first") {
  auto model = program_replay_test::fixture_llama();
  program_replay_test::plant_bugs(model);
  const auto report = tracetorch::replay(model, tracetorch_test::tiny_llama_dir() / "trace_st");
  DOCTEST_INFO(tracetorch::replay_report_text(report, "LlamaModel"));
  DOCTEST_CHECK(program_replay_test::innermost(report) ==
                std::set<std::string>{"LlamaModel.rotary_emb", "LlamaModel.layers.2.post_attention_layernorm"});
  DOCTEST_REQUIRE(report.calls.size() >= 2);
  DOCTEST_CHECK(report.calls[0].path == "LlamaModel.rotary_emb");  // innermost first, in execution order
  DOCTEST_CHECK(report.calls[1].path == "LlamaModel.layers.2.post_attention_layernorm");
  DOCTEST_CHECK(report.calls[1].elements_out_of_tolerance > 0);
  DOCTEST_CHECK(report.calls[1].max_abs > 1e-3);
  // Their parents diverge too, but not innermost: the layer 2 block and the root.
  std::set<std::string> others;
  for (const auto& call : report.calls) {
    if (call.status == tracetorch::ReplayStatus::diverges && !call.innermost) others.insert(call.path);
  }
  DOCTEST_CHECK(others == std::set<std::string>{"LlamaModel", "LlamaModel.layers.2"});

  // The plain diff of the same port's trace names the rotary embedding only.
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / "st", .do_prune_layers = false, .use_repr = false});
    model({.input_ids = tracetorch::safetensors::load_single(tracetorch_test::tiny_llama_dir() / "input_ids.safetensors", "input_ids")});
  }
  const auto diff = tracetorch_test::run_program(TRACETORCH_DIFF, (tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " +
                                                                      (dir / "st").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 1);
  DOCTEST_CHECK(diff.output.find("first divergence: LlamaModel.rotary_emb") != std::string::npos);
  DOCTEST_CHECK(diff.output.find("first divergence: LlamaModel.layers.2.post_attention_layernorm") == std::string::npos);
}

DOCTEST_TEST_CASE("replay with accept rules: a reviewed difference does not make its call diverge, and is listed") {
  auto model = program_replay_test::fixture_llama();
  program_replay_test::plant_bugs(model);
  tracetorch::ReplayOptions options;
  options.accept = tracetorch::parse_accept_rules(
      "LlamaModel.layers.2.post_attention_layernorm:outputs  values  reviewed: the port's epsilon on purpose\n"
      "LlamaModel.layers.2.mlp:inputs.*  values  reviewed: what the norm's epsilon changes in layer 2\n",
      "rules.txt");
  const auto report = tracetorch::replay(model, tracetorch_test::tiny_llama_dir() / "trace_st", options);
  const auto text = tracetorch::replay_report_text(report, "LlamaModel");
  DOCTEST_INFO(text);
  // Only the rotary bug is left; the norm's call, and its layer (whose mlp gets the norm's output), no longer diverge.
  DOCTEST_CHECK(program_replay_test::innermost(report) == std::set<std::string>{"LlamaModel.rotary_emb"});
  const auto norm = std::find_if(report.calls.begin(), report.calls.end(),
                                 [](const auto& c) { return c.path == "LlamaModel.layers.2.post_attention_layernorm"; });
  DOCTEST_REQUIRE(norm != report.calls.end());
  DOCTEST_CHECK(norm->status == tracetorch::ReplayStatus::match);
  const auto layer = std::find_if(report.calls.begin(), report.calls.end(), [](const auto& c) { return c.path == "LlamaModel.layers.2"; });
  DOCTEST_REQUIRE(layer != report.calls.end());
  DOCTEST_CHECK(layer->status == tracetorch::ReplayStatus::match);
  DOCTEST_CHECK(layer->accepted.size() == 1);
  DOCTEST_REQUIRE(norm->accepted.size() == 1);
  DOCTEST_CHECK(norm->accepted[0].find("values accepted (reviewed: the port's epsilon on purpose)") != std::string::npos);
  const auto listed_at = text.find("accepted differences (reviewed rules):\n");
  DOCTEST_CHECK(listed_at != std::string::npos);
  DOCTEST_CHECK(text.find("\n  LlamaModel.layers.2.post_attention_layernorm (call 0): its outputs", listed_at) != std::string::npos);
  const auto json = boost::json::parse(tracetorch::replay_report_json(report));
  bool listed = false;
  for (const auto& call : json.as_array()) listed = listed || call.as_object().contains("accepted");
  DOCTEST_CHECK(listed);
  // A rule of another kind accepts nothing.
  options.accept = tracetorch::parse_accept_rules("LlamaModel.layers.2.post_attention_layernorm  shape  not this kind\n", "rules.txt");
  const auto strict = tracetorch::replay(model, tracetorch_test::tiny_llama_dir() / "trace_st", options);
  DOCTEST_CHECK(program_replay_test::innermost(strict).size() == 2);
}

DOCTEST_TEST_CASE("llama_trace --replay --accept: the rules file read, the accepted bug no longer fails") {
  tracetorch_test::TempDir dir;
  const auto fixture = tracetorch_test::tiny_llama_dir();
  tracetorch_test::write_text(dir / "rules.txt",
                              "# the Python side's planted bugs and all they change, accepted to show the flag\n"
                              "LlamaModel*  values  reviewed: both bugs planted on purpose\n");
  tracetorch_test::write_text(dir / "other_kind.txt", "LlamaModel*  shape  accepts no values\n");
  const std::string arguments = "--config " + (fixture / "config.json").string() + " --weights " + (fixture / "model.safetensors").string() +
                                " --replay " + (tracetorch_test::data_dir() / "tiny_llama_bugs" / "trace_st").string();
  auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments + " --accept " + (dir / "rules.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(result.output.find("accepted differences (reviewed rules):") != std::string::npos);
  result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments + " --accept " + (dir / "other_kind.txt").string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("accepted differences") == std::string::npos);
  result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments + " --accept " + (dir / "missing.txt").string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("missing.txt") != std::string::npos);
}

DOCTEST_TEST_CASE("llama_trace --replay against a Python reference with both bugs planted on its side: exactly the modules holding them") {
  tracetorch_test::TempDir dir;
  const auto fixture = tracetorch_test::tiny_llama_dir();
  const auto result = tracetorch_test::run_program(
      TRACETORCH_LLAMA_TRACE, "--config " + (fixture / "config.json").string() + " --weights " + (fixture / "model.safetensors").string() +
                                  " --replay " + (tracetorch_test::data_dir() / "tiny_llama_bugs" / "trace_st").string() + " --json " +
                                  (dir / "report.json").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  // rotate_half serves every attention; the epsilon is layer 2's post-attention norm's.
  const auto json = tracetorch_test::read_json(dir / "report.json");
  std::set<std::string> innermost, statuses;
  for (const auto& value : json.as_array()) {
    const auto& call = value.as_object();
    statuses.insert(std::string(call.at("status").as_string()));
    if (call.at("status") == "diverges" && call.at("innermost").as_bool()) {
      innermost.insert(std::string(call.at("path").as_string()));
      DOCTEST_CHECK(call.at("elements_out_of_tolerance").to_number<std::int64_t>() > 0);
      DOCTEST_CHECK(call.at("max_abs").to_number<double>() > 0);
      DOCTEST_CHECK(call.contains("max_rel"));
    }
  }
  DOCTEST_CHECK(innermost == std::set<std::string>{"LlamaModel.layers.0.self_attn", "LlamaModel.layers.1.self_attn",
                                                   "LlamaModel.layers.2.self_attn", "LlamaModel.layers.3.self_attn",
                                                   "LlamaModel.layers.2.post_attention_layernorm"});
  DOCTEST_CHECK(statuses == std::set<std::string>{"match", "diverges"});
  DOCTEST_CHECK(result.output.find("innermost diverging calls (the module's own code differs):\n"
                                   "  LlamaModel.layers.0.self_attn (call 0): the call of LlamaModel.layers.0.self_attn.o_proj") !=
                std::string::npos);
}

DOCTEST_TEST_CASE("replay: calls that cannot be replayed say why and how") {
  auto model = program_replay_test::fixture_llama();
  // A printed trace has no values to run on.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::replay(model, tracetorch_test::tiny_llama_dir() / "trace_repr"),
                               doctest::Contains("replay needs a trace with tensor files"), tracetorch::Error);
  // The positional Llama of tests/data/tiny_llama calls its modules in another convention:
  // its root passes input_ids positionally, which LlamaModel's keyword-only forward does not take.
  const auto report = tracetorch::replay(model, tracetorch_test::tiny_llama_positional_dir() / "trace_st");
  DOCTEST_INFO(tracetorch::replay_report_text(report, "LlamaModel"));
  const auto root = std::find_if(report.calls.begin(), report.calls.end(), [](const auto& c) { return c.path == "LlamaModel"; });
  DOCTEST_REQUIRE(root != report.calls.end());
  DOCTEST_CHECK(root->status == tracetorch::ReplayStatus::not_replayable);
  DOCTEST_CHECK(root->reason == "the call passes 1 positional arguments, the forward takes 0");
  DOCTEST_CHECK_FALSE(root->hint.empty());
  const auto json = tracetorch::replay_report_json(report);
  DOCTEST_CHECK(json.find("\"status\":\"not_replayable\"") != std::string::npos);
}

}  // DOCTEST_TEST_SUITE
