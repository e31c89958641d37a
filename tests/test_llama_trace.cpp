// examples/llama_trace.cpp: the command line, its output and its errors.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>

namespace {

tracetorch_test::RunResult run_llama_trace(const std::string& arguments) {
  return tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments);
}

std::string fixture(const std::string& name) { return (tracetorch_test::tiny_llama_dir() / name).string(); }

std::string fixture_arguments() {
  return "--config " + fixture("config.json") + " --weights " + fixture("model.safetensors") + " --input-ids " +
         fixture("input_ids.safetensors") + " --no-prune-layers";
}

}  // namespace

DOCTEST_TEST_SUITE("llama_trace") {

DOCTEST_TEST_CASE("the port's trace equals upstream transformers' (tiny_llama_upstream), both kinds") {
  tracetorch_test::TempDir dir;
  const auto repr = run_llama_trace(fixture_arguments() + " --debug-path " + (dir / "repr").string());
  DOCTEST_INFO(repr.output);
  DOCTEST_REQUIRE(repr.exit_code == 0);
  const auto st = run_llama_trace(fixture_arguments() + " --safetensors --debug-path " + (dir / "st").string());
  DOCTEST_REQUIRE(st.exit_code == 0);
  // The JSON files as expect_upstream_trace checks them, every tensor file within 1e-5 of Python's,
  // and tracetorch-diff with no accept rules.
  DOCTEST_CHECK(tracetorch_test::expect_trace_matches_reference(dir.path(), tracetorch_test::tiny_llama_dir(), "LlamaModel") == 142);
}

DOCTEST_TEST_CASE("traces the fixture model and prints each leaf's output shape") {
  tracetorch_test::TempDir dir;
  const auto result = run_llama_trace("--config " + fixture("config.json") + " --weights " + fixture("model.safetensors") +
                                      " --input-ids " + fixture("input_ids.safetensors") + " --no-prune-layers --safetensors" +
                                      " --debug-path " + dir.path().string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  DOCTEST_CHECK(result.output.find("LlamaModel_debug_tree_SUMMARY.json") != std::string::npos);
  DOCTEST_CHECK(result.output.find("LlamaModel.layers.3.mlp.down_proj -> torch.Size([2, 7, 64])") != std::string::npos);
  DOCTEST_CHECK(result.output.find("LlamaModel.rotary_emb -> torch.Size([1, 7, 16]), torch.Size([1, 7, 16])") !=
                std::string::npos);
  const auto ours = tracetorch::safetensors::load_single(dir / "LlamaModel.norm_outputs.safetensors");
  const auto ref = tracetorch::safetensors::load_single(tracetorch_test::tiny_llama_dir() / "trace_st" /
                                                        "LlamaModel.norm_outputs.safetensors");
  DOCTEST_CHECK(torch::allclose(ours, ref, 0, 1e-5));

  // Run again over that trace: the files it replaces are kept as spares while the process runs
  // (reuse_previous_files), and go with it.
  const auto again = run_llama_trace("--config " + fixture("config.json") + " --weights " + fixture("model.safetensors") +
                                     " --input-ids " + fixture("input_ids.safetensors") + " --no-prune-layers --safetensors" +
                                     " --debug-path " + dir.path().string());
  DOCTEST_REQUIRE(again.exit_code == 0);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    DOCTEST_CHECK_MESSAGE(entry.is_regular_file(), "left in the debug path: " << entry.path().filename().string());
  }
  // The file names of the Python trace, one for one (keyword inputs named _inputs_kwargs_<name>).
  std::set<std::string> ours_names, ref_names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) ours_names.insert(entry.path().filename().string());
  for (const auto& entry : std::filesystem::directory_iterator(tracetorch_test::tiny_llama_dir() / "trace_st")) {
    ref_names.insert(entry.path().filename().string());
  }
  DOCTEST_CHECK(ours_names == ref_names);
}

DOCTEST_TEST_CASE("--output-hidden-states/--output-attentions with --dump-captured write the captured tensors") {
  tracetorch_test::TempDir dir;
  const auto result = run_llama_trace("--config " + fixture("config.json") + " --weights " + fixture("model.safetensors") +
                                      " --input-ids " + fixture("input_ids.safetensors") +
                                      " --output-hidden-states --output-attentions --dump-captured " +
                                      (dir / "captured").string() + " --debug-path " + (dir / "trace").string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  const auto ref = tracetorch_test::tiny_llama_dir() / "trace_st";
  for (int i = 0; i < 4; ++i) {
    DOCTEST_INFO("layer ", i);
    const auto hidden = tracetorch::safetensors::load_single(dir / "captured" / ("hidden_states_" + std::to_string(i) + ".safetensors"));
    const auto layer_input = tracetorch::safetensors::load_single(ref / ("LlamaModel.layers." + std::to_string(i) + "_inputs_args_0.safetensors"));
    DOCTEST_CHECK(torch::allclose(hidden, layer_input, 0, 1e-5));
    const auto attention = tracetorch::safetensors::load_single(dir / "captured" / ("attentions_" + std::to_string(i) + ".safetensors"));
    DOCTEST_CHECK((attention.sizes() == c10::IntArrayRef{2, 4, 7, 7}));
  }
  const auto last = tracetorch::safetensors::load_single(dir / "captured" / "hidden_states_4.safetensors");
  DOCTEST_CHECK(torch::allclose(last, tracetorch::safetensors::load_single(ref / "LlamaModel.norm_outputs.safetensors"), 0, 1e-5));
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "captured" / "hidden_states_5.safetensors"));
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "captured" / "attentions_4.safetensors"));
  // The options show in the trace as the keyword arguments that were set.
  const auto summary = tracetorch_test::read_json(dir / "trace" / "LlamaModel_debug_tree_SUMMARY.json");
  const auto& kwargs = summary.at("inputs").at("kwargs").as_object();
  std::vector<std::string> keys;
  for (const auto& entry : kwargs) keys.emplace_back(entry.key());
  DOCTEST_CHECK(keys == std::vector<std::string>{"input_ids", "output_hidden_states", "output_attentions"});
  DOCTEST_CHECK(kwargs.at("output_hidden_states") == "True");
  DOCTEST_CHECK(kwargs.at("output_attentions") == "True");

  const auto misuse = run_llama_trace("--dump-captured " + (dir / "x").string() + " --debug-path " + (dir / "y").string());
  DOCTEST_CHECK(misuse.exit_code == 2);
  DOCTEST_CHECK(misuse.output.find("--dump-captured needs --output-hidden-states, --output-attentions or --call output_<key>=True") != std::string::npos);
}

DOCTEST_TEST_CASE("random weights and ids from --batch/--seq/--seed, pruned by default") {
  tracetorch_test::TempDir dir;
  const std::string config = (dir / "config.json").string();
  std::ofstream(config) << R"({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50})";
  const auto result = run_llama_trace("--config " + config + " --batch 3 --seq 5 --seed 1 --debug-path " + (dir / "out").string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  const auto summary = tracetorch_test::read_json(dir / "out" / "LlamaModel_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(summary.at("inputs").at("args").as_array().empty());
  DOCTEST_CHECK(summary.at("inputs").at("kwargs").at("input_ids").at("shape") == "torch.Size([3, 5])");
  DOCTEST_CHECK(result.output.find("LlamaModel.layers.1.") == std::string::npos);  // pruned
  DOCTEST_CHECK(result.output.find("LlamaModel.layers.2.mlp.down_proj -> torch.Size([3, 5, 32])") != std::string::npos);
}

DOCTEST_TEST_CASE("bad command lines and bad files are clear errors") {
  tracetorch_test::TempDir dir;
  const std::string out = " --debug-path " + (dir / "out").string();
  auto result = run_llama_trace("--config " + fixture("config.json"));
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("--debug-path DIR is required") != std::string::npos);
  result = run_llama_trace("--batch zero" + out);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("--batch needs an integer") != std::string::npos);
  result = run_llama_trace("--frobnicate" + out);
  DOCTEST_CHECK(result.exit_code == 2);

  result = run_llama_trace("--config " + (dir / "missing.json").string() + out);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("missing.json") != std::string::npos);

  std::ofstream(dir / "broken.json") << "{\"hidden_size\": 64,";
  result = run_llama_trace("--config " + (dir / "broken.json").string() + out);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("broken.json is not valid JSON") != std::string::npos);

  // Weights of another config: the first mismatching tensor is named with both shapes.
  std::ofstream(dir / "small.json") << R"({"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
                                           "num_key_value_heads": 2, "intermediate_size": 172, "vocab_size": 1000})";
  result = run_llama_trace("--config " + (dir / "small.json").string() + " --weights " + fixture("model.safetensors") + out);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("has shape") != std::string::npos);
  DOCTEST_CHECK(result.output.find("model.safetensors") != std::string::npos);

  // A weights file with one tensor missing and one unexpected.
  auto tensors = tracetorch::safetensors::load(tracetorch_test::tiny_llama_dir() / "model.safetensors");
  std::vector<std::pair<std::string, torch::Tensor>> edited(tensors.begin(), tensors.end());
  edited.erase(std::find_if(edited.begin(), edited.end(), [](const auto& e) { return e.first == "norm.weight"; }));
  tracetorch::safetensors::save(dir / "missing_norm.safetensors", edited);
  result = run_llama_trace("--config " + fixture("config.json") + " --weights " + (dir / "missing_norm.safetensors").string() + out);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("missing tensor \"norm.weight\"") != std::string::npos);
  edited.emplace_back("lm_head.weight", torch::zeros({2}));
  tracetorch::safetensors::save(dir / "extra.safetensors", edited);
  result = run_llama_trace("--config " + fixture("config.json") + " --weights " + (dir / "extra.safetensors").string() + out);
  DOCTEST_CHECK(result.output.find("unexpected tensor \"lm_head.weight\"") != std::string::npos);

  std::ofstream(dir / "garbage.safetensors") << "not a safetensors file";
  result = run_llama_trace("--config " + fixture("config.json") + " --weights " + (dir / "garbage.safetensors").string() + out);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("garbage.safetensors") != std::string::npos);
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out" / "LlamaModel_debug_tree_SUMMARY.json"));
}

using tracetorch_test::expect_refused;  // one line on stderr (the tool's "llama_trace: error: ..."), exit 1

DOCTEST_TEST_CASE("config sizes that are zero, negative, too large or overflow, or an activation not ported: one line, exit 1, nothing built") {
  tracetorch_test::TempDir dir;
  const std::string out = " --debug-path " + (dir / "out").string();
  const auto with_config = [&](const std::string& json, const std::string& extra = "") {
    std::ofstream(dir / "config.json") << json;
    return run_llama_trace("--config " + (dir / "config.json").string() + extra + out);
  };
  expect_refused(with_config(R"({"hidden_size": 0})"), "config.json: hidden_size is 0: sizes must be positive");
  expect_refused(with_config(R"({"vocab_size": -5})"), "vocab_size is -5: sizes must be positive");
  expect_refused(with_config(R"({"num_hidden_layers": -1})"), "num_hidden_layers is -1: it must be >= 0");
  expect_refused(with_config(R"({"max_position_embeddings": 0})"), "max_position_embeddings is 0");
  expect_refused(with_config(R"({"rms_norm_eps": 0})"), "rms_norm_eps must be a finite number > 0");
  // Read, not left at its default: an activation the port's MLP does not have is refused.
  expect_refused(with_config(R"({"hidden_act": "gelu"})"), "config.json: hidden_act \"gelu\" is not ported (the Llama MLP's activation is SiLU)");
  expect_refused(with_config(R"({"vocab_size": 18446744073709551615})"), "\"vocab_size\" is 18446744073709551615, too large");
  // hidden_size^2 overflows 64 bits: refused before LibTorch multiplies it.
  expect_refused(with_config(R"({"hidden_size": 4294967296, "num_attention_heads": 1, "num_key_value_heads": 1})"),
                 (dir / "config.json").string() + ": the config's sizes for input ids [4, 30] overflow when multiplied: refused");
  // Valid, but ~1 TB of weights: more than any test machine has.
  const auto huge = with_config(R"({"vocab_size": 100000000, "hidden_size": 4096, "num_attention_heads": 32})");
  expect_refused(huge, "GiB: refused");
  expect_refused(huge, (dir / "config.json").string() + ": the config needs about ");
  expect_refused(with_config(R"({"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                                  "intermediate_size": 128, "vocab_size": 100})",
                             " --batch 1000000 --seq 1000000"),
                 "for input ids [1000000, 1000000]");
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

DOCTEST_TEST_CASE("input ids that are empty or out of range: one line, exit 1") {
  tracetorch_test::TempDir dir;
  const std::string args = "--config " + fixture("config.json") + " --debug-path " + (dir / "out").string() + " --input-ids ";
  tracetorch::safetensors::save(dir / "empty.safetensors", tracetorch::safetensors::NamedTensors{{"input_ids", torch::zeros({2, 0}, torch::kInt64)}});
  expect_refused(run_llama_trace(args + (dir / "empty.safetensors").string()), "input ids are empty (shape [2, 0])");
  tracetorch::safetensors::save(dir / "rows.safetensors", tracetorch::safetensors::NamedTensors{{"input_ids", torch::zeros({0, 3}, torch::kInt64)}});
  expect_refused(run_llama_trace(args + (dir / "rows.safetensors").string()), "input ids are empty (shape [0, 3])");
  const auto vocab = tracetorch_test::read_json(fixture("config.json")).at("vocab_size").to_number<std::int64_t>();
  tracetorch::safetensors::save(dir / "high.safetensors", tracetorch::safetensors::NamedTensors{{"input_ids", torch::full({1, 3}, vocab, torch::kInt64)}});
  expect_refused(run_llama_trace(args + (dir / "high.safetensors").string()),
                 "input ids outside [0, vocab_size=" + std::to_string(vocab) + "): min " + std::to_string(vocab));
  tracetorch::safetensors::save(dir / "negative.safetensors", tracetorch::safetensors::NamedTensors{{"input_ids", torch::full({1, 3}, -1, torch::kInt64)}});
  expect_refused(run_llama_trace(args + (dir / "negative.safetensors").string()), "input ids outside [0, vocab_size=");
  tracetorch::safetensors::save(dir / "float.safetensors", tracetorch::safetensors::NamedTensors{{"input_ids", torch::zeros({1, 3})}});
  expect_refused(run_llama_trace(args + (dir / "float.safetensors").string()), "input ids must be an int64 [batch, seq] tensor");
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

DOCTEST_TEST_CASE("RANK=1: rank 1 writes nothing, says so on stderr, exit 0") {
  tracetorch_test::TempDir dir;
  const auto result = tracetorch_test::run_program(std::string("RANK=1 ") + TRACETORCH_LLAMA_TRACE,
                                                   fixture_arguments() + " --debug-path " + (dir / "out").string());
  DOCTEST_CHECK_MESSAGE(result.exit_code == 0, result.output);
  DOCTEST_CHECK(result.output ==
                "llama_trace: RANK=1: rank 1 writes nothing (only rank 0 traces; a tensor-parallel program traces every rank)\n");
  // On stderr: stdout stays empty (tests/test_tensor_parallel_llama.cpp checks the two apart).
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
  const auto bad = tracetorch_test::run_program(std::string("RANK=one ") + TRACETORCH_LLAMA_TRACE,
                                                fixture_arguments() + " --debug-path " + (dir / "out").string());
  expect_refused(bad, "RANK=one is not an integer");
}

DOCTEST_TEST_CASE("a FIFO or a directory given as a file: refused at once, one line, exit 1") {
  tracetorch_test::TempDir dir;
  const auto fifo = dir / "pipe";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // `timeout` bounds the wait: a tool that opened the FIFO would block there until killed (exit 124).
  const auto run = [&](const std::string& arguments) {
    return tracetorch_test::run_program(std::string("timeout 60 ") + TRACETORCH_LLAMA_TRACE,
                                        arguments + " --debug-path " + (dir / "out").string());
  };
  const std::string fifo_message = "pipe: is a FIFO (named pipe), not a regular file: refused";
  expect_refused(run("--config " + fifo.string()), fifo_message);
  expect_refused(run("--config " + fixture("config.json") + " --weights " + fifo.string()), fifo_message);
  expect_refused(run("--config " + fixture("config.json") + " --input-ids " + fifo.string()), fifo_message);
  expect_refused(run("--config " + dir.path().string()), ": is a directory, not a file");
  // --weights takes a checkpoint folder too (tracetorch::checkpoint::load): an empty one is named as such.
  expect_refused(run("--config " + fixture("config.json") + " --weights " + dir.path().string()),
                 "the folder has neither model.safetensors nor model.safetensors.index.json");
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

}  // DOCTEST_TEST_SUITE
