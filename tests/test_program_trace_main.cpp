// tracetorch/trace_program.hpp: gemma_trace and gpt2_trace (one-line mains) on their fixtures,
// --call and --inputs.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <tracetorch/safetensors.hpp>

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace program_trace_main_test {

std::string in(const std::filesystem::path& dir, const std::string& name) { return (dir / name).string(); }

std::string gemma_arguments() {
  const auto dir = tracetorch_test::data_dir() / "gemma";
  return "--config " + in(dir, "config.json") + " --weights " + in(dir, "model.safetensors.index.json") + " --input-ids " +
         in(dir, "input_ids.safetensors") + " --no-prune-layers --call use_cache=False";
}

std::string gpt2_arguments() {
  const auto dir = tracetorch_test::data_dir() / "gpt2";
  return "--config " + in(dir, "config.json") + " --weights " + in(dir, "model.safetensors") + " --input-ids " +
         in(dir, "input_ids.safetensors") + " --no-prune-layers";
}

/// Both kinds of trace by `program`, then tracetorch-diff against the fixture's: the diff's exit status of each.
std::vector<int> trace_and_diff(const std::string& program, const std::string& arguments, const std::filesystem::path& fixture,
                                const tracetorch_test::TempDir& dir) {
  std::vector<int> exits;
  for (const std::string kind : {"repr", "st"}) {
    const auto traced = tracetorch_test::run_program(
        program, arguments + (kind == "st" ? " --safetensors" : "") + " --debug-path " + (dir / kind).string());
    DOCTEST_INFO(traced.output);
    DOCTEST_REQUIRE(traced.exit_code == 0);
    const auto diff = tracetorch_test::run_program(TRACETORCH_DIFF, (fixture / ("trace_" + kind)).string() + " " + (dir / kind).string());
    DOCTEST_INFO(diff.output);
    exits.push_back(diff.exit_code);
  }
  return exits;
}

}  // namespace program_trace_main_test

DOCTEST_TEST_SUITE("trace programs") {

DOCTEST_TEST_CASE("gemma_trace on its fixture: --call use_cache=False, both traces equal the reference's") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const auto fixture = tracetorch_test::data_dir() / "gemma";
  DOCTEST_CHECK(trace_and_diff(TRACETORCH_GEMMA_TRACE, gemma_arguments(), fixture, dir) == std::vector<int>{0, 0});
  const std::string name = "GemmaModel_debug_tree_FULL_TENSORS.json";
  DOCTEST_CHECK(tracetorch_test::read_file(dir / "repr" / name) == tracetorch_test::read_file(fixture / "trace_repr" / name));
  // Without --call the config's use_cache records a cache the reference's call did not have: the diff says so.
  const auto cached = tracetorch_test::run_program(
      TRACETORCH_GEMMA_TRACE, "--config " + in(fixture, "config.json") + " --weights " + in(fixture, "model.safetensors.index.json") +
                                  " --input-ids " + in(fixture, "input_ids.safetensors") + " --no-prune-layers --debug-path " +
                                  (dir / "cached").string());
  DOCTEST_REQUIRE(cached.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::run_program(TRACETORCH_DIFF, (fixture / "trace_repr").string() + " " + (dir / "cached").string())
                    .exit_code == 1);
}

DOCTEST_TEST_CASE("gpt2_trace on its fixture: both traces equal the reference's") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const auto fixture = tracetorch_test::data_dir() / "gpt2";
  DOCTEST_CHECK(trace_and_diff(TRACETORCH_GPT2_TRACE, gpt2_arguments(), fixture, dir) == std::vector<int>{0, 0});
  const auto traced = tracetorch_test::run_program(TRACETORCH_GPT2_TRACE, gpt2_arguments() + " --debug-path " + (dir / "again").string());
  DOCTEST_CHECK(traced.output.find("gpt2_trace: traced GPT2Model (2 layers, hidden 8) on input_ids [2, 5] -> last_hidden_state") !=
                std::string::npos);
}

DOCTEST_TEST_CASE("every trace program says which keys of --config no field takes, one line naming the file; keys no forward reads are not among them") {
  tracetorch_test::TempDir dir;
  const auto data = tracetorch_test::data_dir();
  // Each program with its fixture's config; GPT-2's learned positions stop at its n_positions (16).
  const std::vector<std::tuple<std::string, std::filesystem::path, std::string>> programs = {
      {TRACETORCH_LLAMA_TRACE, data / "tiny_llama_upstream" / "config.json", ""},
      {TRACETORCH_GEMMA_TRACE, data / "gemma" / "config.json", ""},
      {TRACETORCH_GEMMA2_TRACE, data / "gemma2" / "config.json", ""},
      {TRACETORCH_GPT2_TRACE, data / "gpt2" / "config.json", " --seq 5"},
      {TRACETORCH_LLAVA_TRACE, data / "llava" / "config.json", ""},
      {TRACETORCH_QWEN2_MOE_TRACE, data / "qwen2_moe" / "config.json", ""},
      {TRACETORCH_QWEN3_TRACE, data / "qwen3" / "config.json", ""}};
  for (const auto& [program, config, extra] : programs) {
    const std::string name = std::filesystem::path(program).filename().string();
    DOCTEST_INFO(name);
    // A typo'd key, nested or not, beside the fixture's own keys (architectures, model_type, ...).
    auto json = tracetorch_test::read_json(config).as_object();
    json["num_hiden_layers"] = 1;
    if (auto* vision = json.if_contains("vision_config")) vision->as_object()["hiden_size"] = 8;
    const auto typo = dir / (name + "_typo.json");
    tracetorch_test::write_text(typo, boost::json::serialize(json));
    const auto run = tracetorch_test::run_program(program, "--config " + typo.string() + extra + " --debug-path " + (dir / name).string());
    DOCTEST_INFO(run.output);
    DOCTEST_CHECK(run.exit_code == 0);
    const std::string expected = json.contains("vision_config") ? "2 keys no field takes: vision_config.hiden_size, num_hiden_layers (ignored)"
                                                                : "1 key no field takes: num_hiden_layers (ignored)";
    DOCTEST_CHECK(tracetorch_test::contains(run.output, name + ": " + typo.string() + ": " + expected + "\n"));
    // The fixture's config as upstream wrote it: every key it has is read, or bookkeeping.
    const auto clean = tracetorch_test::run_program(program, "--config " + config.string() + extra + " --debug-path " + (dir / name).string());
    DOCTEST_CHECK(clean.exit_code == 0);
    DOCTEST_CHECK_MESSAGE(!tracetorch_test::contains(clean.output, "no field takes"), clean.output);
  }
}

DOCTEST_TEST_CASE("--call: an unknown name or a wrong type is a usage error listing the call's keywords") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const std::string out = " --debug-path " + (dir / "out").string();
  auto result = tracetorch_test::run_program(TRACETORCH_GEMMA_TRACE, gemma_arguments() + " --call use_cahce=False" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("gemma_trace: --call use_cahce=False: no keyword 'use_cahce': the call's keywords are "
                                   "input_ids, attention_mask, position_ids, past_key_values, inputs_embeds, use_cache, "
                                   "output_attentions, output_hidden_states, cache_position") != std::string::npos);
  result = tracetorch_test::run_program(TRACETORCH_GEMMA_TRACE, gemma_arguments() + " --call use_cache=1" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("use_cache takes True or False, not 1 (the call's keywords: input_ids,") != std::string::npos);
  result = tracetorch_test::run_program(TRACETORCH_GEMMA_TRACE, gemma_arguments() + " --call use_cache=Flase" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("'Flase' is not a Python literal") != std::string::npos);
  // Llama's root call is (LlamaModelInputs, OutputOptions): the names of both.
  result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, "--call output_router_logits=True" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("inputs_embeds, cache_position, output_hidden_states, output_attentions, use_cache") !=
                std::string::npos);
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

DOCTEST_TEST_CASE("--shared-call-files: transformers' file names for repeated calls, only with --safetensors") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, "--shared-call-files --debug-path " + (dir / "a").string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("--shared-call-files needs --safetensors") != std::string::npos);
  // Gemma calls no module twice: the names, and so the diff against the fixture, are unchanged.
  result = tracetorch_test::run_program(TRACETORCH_GEMMA_TRACE, gemma_arguments() + " --safetensors --shared-call-files --debug-path " +
                                                                    (dir / "b").string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  const auto diff = tracetorch_test::run_program(
      TRACETORCH_DIFF, (tracetorch_test::data_dir() / "gemma" / "trace_st").string() + " " + (dir / "b").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 0);
}

DOCTEST_TEST_CASE("a flag that names a file refuses an empty value, naming the flag; a switch refuses a value") {
  tracetorch_test::TempDir dir;
  const std::string out = " --debug-path " + (dir / "out").string();
  for (const std::string flag : {"--config", "--weights", "--input-ids", "--inputs", "--replay", "--json"}) {
    const auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, flag + "=" + out);
    DOCTEST_INFO(result.output);
    DOCTEST_CHECK(result.exit_code == 2);
    DOCTEST_CHECK(result.output.find(flag + " needs a path, got ''") != std::string::npos);
  }
  const auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, "--safetensors=yes" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("--safetensors takes no value") != std::string::npos);
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

DOCTEST_TEST_CASE("--set: a config field as a Python literal after --config, checked again; an unknown key, a wrong type or a bad size refused by name") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const auto llama = tracetorch_test::tiny_llama_dir();
  const std::string base = "--config " + in(llama, "config.json") + " --input-ids " + in(llama, "input_ids.safetensors") +
                           " --debug-path " + (dir / "out").string();
  const auto smaller = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, base + " --set num_hidden_layers=1 --set rms_norm_eps=1e-5");
  DOCTEST_INFO(smaller.output);
  DOCTEST_REQUIRE(smaller.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::contains(smaller.output, "traced LlamaModel (1 layers, hidden 64)"));
  const auto modules = tracetorch_test::module_paths(tracetorch_test::read_json(dir / "out" / "LlamaModel_debug_tree_SUMMARY.json"));
  DOCTEST_CHECK(std::count(modules.begin(), modules.end(), "LlamaModel.layers.0") == 1);
  DOCTEST_CHECK(std::count(modules.begin(), modules.end(), "LlamaModel.layers.1") == 0);

  const auto refused = [&](const std::string& set, const std::string& message) {
    const auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, base + " --set " + set);
    DOCTEST_INFO(result.output);
    DOCTEST_CHECK(result.exit_code == 1);
    DOCTEST_CHECK(tracetorch_test::contains(result.output, message));
  };
  refused("num_hiden_layers=1", "llama_trace: error: tracetorch: --set: \"num_hiden_layers\" names no field (known here: vocab_size, ");
  refused("hidden_size=True", "llama_trace: error: tracetorch: --set: \"hidden_size\" must be an integer");
  refused("hidden_size=0", "llama_trace: error: llama: " + in(llama, "config.json") + " with --set: hidden_size is 0: sizes must be positive");
  refused("hidden_act=\\'gelu\\'", "hidden_act \"gelu\" is not ported");
  const auto malformed = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, base + " --set num_hidden_layers");
  DOCTEST_CHECK(malformed.exit_code == 2);
  DOCTEST_CHECK(tracetorch_test::contains(malformed.output, "--set needs KEY=VALUE (a config field and a Python literal), got 'num_hidden_layers'"));

  // An attribute map's spelling: GPT-2's hidden_size is n_embd.
  const auto gpt2 = tracetorch_test::run_program(TRACETORCH_GPT2_TRACE, "--set hidden_size=16 --set n_layer=1 --set n_head=2 --seq 5 "
                                                                        "--set vocab_size=50 --debug-path " + (dir / "gpt2").string());
  DOCTEST_INFO(gpt2.output);
  DOCTEST_CHECK(gpt2.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::contains(gpt2.output, "traced GPT2Model (1 layers, hidden 16)"));

  // A field a validate hook derived (Qwen3's layer_types) is not derived again after --set, as an
  // attribute set after construction in Python: the refusal says how to derive it again.
  const auto qwen3 = tracetorch_test::data_dir() / "qwen3";
  const std::string qwen3_base = "--config " + in(qwen3, "config.json") + " --seq 4 --debug-path " + (dir / "qwen3").string();
  const auto stale = tracetorch_test::run_program(TRACETORCH_QWEN3_TRACE, qwen3_base + " --set num_hidden_layers=1");
  DOCTEST_CHECK(stale.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(stale.output, "with --set: layer_types must have one entry per layer (4 for 1 layers; an empty list derives them)"));
  const auto derived = tracetorch_test::run_program(TRACETORCH_QWEN3_TRACE, qwen3_base + " --set 'layer_types=[]' --set num_hidden_layers=1");
  DOCTEST_INFO(derived.output);
  DOCTEST_CHECK(derived.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::contains(derived.output, "traced Qwen3Model (1 layers"));
}

DOCTEST_TEST_CASE("a port's forward that fails says so in one line, without LibTorch's backtrace; GPT-2's positions past n_positions are named") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const auto one_line_error = [](const tracetorch_test::RunResult& result, const std::string& message) {
    tracetorch_test::expect_refused(result, message);
    DOCTEST_CHECK_FALSE(tracetorch_test::contains(result.output, "Exception raised from"));
  };
  // position_ids of the wrong batch reach LibTorch's broadcasting inside the rotary embedding: a c10::Error.
  const auto llama = tracetorch_test::tiny_llama_dir();
  tracetorch::safetensors::save(dir / "positions.safetensors",
                                tracetorch::safetensors::NamedTensors{{"position_ids", torch::zeros({4, 7}, torch::kInt64)}});
  const std::string llama_base = "--config " + in(llama, "config.json") + " --input-ids " + in(llama, "input_ids.safetensors") +
                                 " --debug-path " + (dir / "out").string() + " --inputs ";
  one_line_error(tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, llama_base + (dir / "positions.safetensors").string()),
                 "llama_trace: error: The size of tensor a");
  // A padding mask of the wrong shape: the shared parts' own refusal, with the shape it got.
  tracetorch::safetensors::save(dir / "mask.safetensors",
                                tracetorch::safetensors::NamedTensors{{"attention_mask", torch::ones({4, 7}, torch::kInt64)}});
  one_line_error(tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, llama_base + (dir / "mask.safetensors").string()),
                 "llama_trace: error: create_causal_mask: attention_mask must be [batch = 2, kv] of 1/0, got [4, 7]");
  // GPT-2's learned positions: the default --seq 30 is past the fixture's n_positions of 16.
  const auto gpt2 = tracetorch_test::data_dir() / "gpt2";
  one_line_error(tracetorch_test::run_program(TRACETORCH_GPT2_TRACE, "--config " + in(gpt2, "config.json") + " --debug-path " +
                                                                         (dir / "gpt2").string()),
                 "gpt2_trace: error: gpt2: position ids go up to 29 (past 0 + seq 30), but n_positions is 16: GPT-2's "
                 "learned position table has no row for them");
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "gpt2" / "GPT2Model_debug_tree_SUMMARY.json"));
}

DOCTEST_TEST_CASE("--inputs: each tensor passed as the keyword of its name; a tensor that is no keyword refused") {
  using namespace program_trace_main_test;
  tracetorch_test::TempDir dir;
  const auto fixture = tracetorch_test::data_dir() / "gpt2";
  const auto ids = tracetorch::safetensors::load_single(fixture / "input_ids.safetensors", "input_ids");
  tracetorch::safetensors::save(dir / "inputs.safetensors",
                                tracetorch::safetensors::NamedTensors{{"input_ids", ids}, {"attention_mask", torch::ones_like(ids)}});
  const std::string base = "--config " + in(fixture, "config.json") + " --weights " + in(fixture, "model.safetensors") +
                           " --no-prune-layers --inputs " + (dir / "inputs.safetensors").string();
  const auto result = tracetorch_test::run_program(TRACETORCH_GPT2_TRACE, base + " --debug-path " + (dir / "out").string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  const auto summary = tracetorch_test::read_json(dir / "out" / "GPT2Model_debug_tree_SUMMARY.json");
  std::vector<std::string> keys;
  for (const auto& entry : summary.at("inputs").at("kwargs").as_object()) keys.emplace_back(entry.key());
  DOCTEST_CHECK(keys == std::vector<std::string>{"input_ids", "attention_mask"});

  tracetorch::safetensors::save(dir / "bad.safetensors",
                                tracetorch::safetensors::NamedTensors{{"input_ids", ids}, {"pixel_values", torch::zeros({1, 3})}});
  const auto refused = tracetorch_test::run_program(
      TRACETORCH_GPT2_TRACE, "--inputs " + (dir / "bad.safetensors").string() + " --debug-path " + (dir / "bad").string());
  DOCTEST_CHECK(refused.exit_code == 2);
  DOCTEST_CHECK(refused.output.find("tensor 'pixel_values' is not a keyword of the call: the call's keywords are input_ids, "
                                    "past_key_values, attention_mask") != std::string::npos);
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "bad"));
}

}  // DOCTEST_TEST_SUITE
