// The tensor-parallel Llama (examples/llama_tp) run by `llama_trace --world-size N` on Gloo over
// loopback: every rank traces, tracetorch-diff merges the ranks and compares them with a
// single-process trace. Each run is bounded (`timeout`, which stops the launcher, which stops
// its ranks by pid).

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#ifdef TRACETORCH_TEST_C10D

#include <tracetorch/detail/parallel/launcher.hpp>  // free_loopback_port, no Gloo needed

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace tensor_parallel_llama_test {

/// `env ENV llama_trace ARGS` under a time bound, stderr apart; exit 124 means it hung.
struct TpRun {
  int exit_code;
  std::string output, errors;
};

TpRun run_bounded(const std::string& env, const std::string& program, const std::string& arguments,
                  const std::filesystem::path& scratch) {
  const auto errors = scratch / "stderr.txt";
  // A subshell: run_program's own 2>&1 then leaves the program's stderr in `errors`.
  const auto result = tracetorch_test::run_program("(timeout --kill-after=10 300 env " + env + " " + program,
                                                   arguments + " 2>" + errors.string() + ")");
  std::ifstream in(errors);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {result.exit_code, result.output, text};
}

std::string fixture(const std::string& name) { return (tracetorch_test::tiny_llama_dir() / name).string(); }

std::string upstream_arguments(const std::filesystem::path& debug_path) {
  return "--config " + fixture("config.json") + " --weights " + fixture("model.safetensors") + " --input-ids " +
         fixture("input_ids.safetensors") + " --no-prune-layers --safetensors --debug-path " + debug_path.string();
}

boost::json::value read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return boost::json::parse(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
}

/// The shard spec rank `rank` recorded for `module`'s value at `location`, or null.
boost::json::object shard_entry(const std::filesystem::path& trace, int rank, const std::string& module, const std::string& location) {
  const auto specs = read_json(trace / ("rank_" + std::to_string(rank)) / "tracetorch_shards.json");
  for (const auto& v : specs.at("values").as_array()) {
    if (v.at("module_path").as_string() == module && v.at("location").as_string() == location) return v.as_object();
  }
  return {};
}

}  // namespace tensor_parallel_llama_test

namespace tpl = tensor_parallel_llama_test;

DOCTEST_TEST_SUITE("tensor-parallel llama") {

DOCTEST_TEST_CASE("2 ranks: every rank traces, and the merged trace equals upstream transformers' with no rules") {
  tracetorch_test::TempDir dir;
  const auto run = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, "--world-size 2 " + tpl::upstream_arguments(dir / "tp"), dir.path());
  DOCTEST_INFO(run.output << run.errors);
  DOCTEST_REQUIRE(run.exit_code == 0);
  const auto index = tpl::read_json(dir / "tp" / "tracetorch_ranks.json");
  DOCTEST_CHECK(index.at("world_size").to_number<int>() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const auto rank_dir = dir / "tp" / ("rank_" + std::to_string(rank));
    DOCTEST_CHECK(std::filesystem::exists(rank_dir / "LlamaModel_debug_tree_FULL_TENSORS.json"));
    // q_proj's output: rank r holds features [32r, 32r + 32) of 64 along the last dim.
    const auto q = tpl::shard_entry(dir / "tp", rank, "LlamaModel.layers.0.self_attn.q_proj", "outputs");
    DOCTEST_REQUIRE(!q.empty());
    DOCTEST_CHECK(q.at("dim").to_number<int>() == 2);
    DOCTEST_CHECK(q.at("offset").to_number<int>() == 32 * rank);
    DOCTEST_CHECK(boost::json::serialize(q.at("full_shape")) == "[2,7,64]");
    // o_proj's input is sharded, its output (all-reduced) is not.
    DOCTEST_CHECK(!tpl::shard_entry(dir / "tp", rank, "LlamaModel.layers.0.self_attn.o_proj", "inputs.args.0").empty());
    DOCTEST_CHECK(tpl::shard_entry(dir / "tp", rank, "LlamaModel.layers.0.self_attn.o_proj", "outputs").empty());
    // act_fn splits intermediate_size 172: 86 a rank.
    DOCTEST_CHECK(tpl::shard_entry(dir / "tp", rank, "LlamaModel.layers.3.mlp.act_fn", "outputs").at("size").to_number<int>() == 86);
  }
  const auto diff = tracetorch_test::run_diff((tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " + (dir / "tp").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::contains(diff.output, "ranks: 2 merged"));
}

DOCTEST_TEST_CASE("4 ranks equal tracetorch's own single-process trace; a config that does not divide is refused") {
  tracetorch_test::TempDir dir;
  tracetorch_test::write_text(dir / "config.json",
                              R"({"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128})");
  const std::string common = "--config " + (dir / "config.json").string() + " --batch 2 --seq 5 --no-prune-layers --safetensors";
  const auto single = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, common + " --debug-path " + (dir / "single").string(), dir.path());
  DOCTEST_REQUIRE(single.exit_code == 0);
  // Seeded random weights and ids: each parallel linear draws its full layer's weights, then slices.
  const auto tp = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, "--world-size 4 " + common + " --debug-path " + (dir / "tp").string(), dir.path());
  DOCTEST_INFO(tp.output << tp.errors);
  DOCTEST_REQUIRE(tp.exit_code == 0);
  DOCTEST_CHECK(tpl::shard_entry(dir / "tp", 3, "LlamaModel.layers.1.mlp.up_proj", "outputs").at("offset").to_number<int>() == 129);
  const auto diff = tracetorch_test::run_diff((dir / "single").string() + " --merge-ranks " + (dir / "tp").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 0);
  DOCTEST_CHECK(tracetorch_test::contains(diff.output, "ranks: 4 merged"));

  // The fixture's 2 key-value heads do not divide by 4: refused before any weight is read.
  const auto refused = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, "--world-size 4 " + tpl::upstream_arguments(dir / "refused"), dir.path());
  DOCTEST_INFO(refused.errors);
  DOCTEST_CHECK(refused.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(refused.errors, "num_key_value_heads 2 not divisible by the world size 4"));
  DOCTEST_CHECK(tracetorch_test::contains(refused.errors, "intermediate_size 172"));

  // --set on the tensor-parallel config (TRACETORCH_CONFIG_EXTENDS: llama::LlamaConfig's keys),
  // and its own divisibility check run again on the result.
  const auto smaller = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, "--world-size 2 " + common + " --set num_hidden_layers=1 --debug-path " +
                                                                        (dir / "set").string(), dir.path());
  DOCTEST_INFO(smaller.output << smaller.errors);
  DOCTEST_REQUIRE(smaller.exit_code == 0);
  for (const int rank : {0, 1}) {
    const auto summary = tracetorch_test::read_file(dir / "set" / ("rank_" + std::to_string(rank)) / "LlamaModel_debug_tree_SUMMARY.json");
    DOCTEST_CHECK(tracetorch_test::contains(summary, "LlamaModel.layers.0.mlp"));
    DOCTEST_CHECK(!tracetorch_test::contains(summary, "LlamaModel.layers.1"));
  }
  const auto set_refused = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, "--world-size 4 " + common + " --set num_key_value_heads=2 --debug-path " +
                                                                            (dir / "set_refused").string(), dir.path());
  DOCTEST_INFO(set_refused.errors);
  DOCTEST_CHECK(set_refused.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(set_refused.errors, "config.json with --set: num_key_value_heads 2 not divisible by the world size 4"));
}

DOCTEST_TEST_CASE("a planted bug, rank 1's o_proj slice at the wrong offset: the diff names o_proj and rank 1") {
  tracetorch_test::TempDir dir;
  const auto run = tpl::run_bounded("LLAMA_TP_FAULT_O_PROJ_OFFSET=1:0", TRACETORCH_LLAMA_TRACE,
                                    "--world-size 2 " + tpl::upstream_arguments(dir / "tp"), dir.path());
  DOCTEST_REQUIRE(run.exit_code == 0);
  const auto diff = tracetorch_test::run_diff((tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " + (dir / "tp").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(diff.output, "rank 1: LlamaModel.layers.0.self_attn.o_proj inputs.args.0: its shard sits at [0, 32)"));
  DOCTEST_CHECK(!tracetorch_test::contains(diff.output, "rank 0: "));
}

DOCTEST_TEST_CASE("a rank killed mid-trace: the others' traces stay whole, the diff reports the missing rank, nothing hangs") {
  tracetorch_test::TempDir dir;
  // Killed after its forward, before its shard specs: rank 0 finishes, the launcher reports rank 1.
  const auto run = tpl::run_bounded("TRACETORCH_FAULT_KILL_RANK=1", TRACETORCH_LLAMA_TRACE,
                                    "--world-size 2 " + tpl::upstream_arguments(dir / "tp"), dir.path());
  DOCTEST_INFO(run.output << run.errors);
  DOCTEST_CHECK(run.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(run.errors, "rank 1 (pid "));
  DOCTEST_CHECK(tracetorch_test::contains(run.errors, "killed by signal 9"));
  DOCTEST_CHECK(std::filesystem::exists(dir / "tp" / "rank_0" / "tracetorch_shards.json"));
  DOCTEST_CHECK(!std::filesystem::exists(dir / "tp" / "rank_1" / "tracetorch_shards.json"));
  // Rank 0's trace alone is a whole transformers trace: its replicated output equals upstream's.
  const auto norm = tracetorch::safetensors::load_single(dir / "tp" / "rank_0" / "LlamaModel.norm_outputs.safetensors");
  const auto ref = tracetorch::safetensors::load_single(tracetorch_test::tiny_llama_dir() / "trace_st" / "LlamaModel.norm_outputs.safetensors");
  DOCTEST_CHECK(torch::allclose(norm, ref, 1e-4, 1e-5));
  const auto diff = tracetorch_test::run_diff((tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " + (dir / "tp").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 2);
  DOCTEST_CHECK(tracetorch_test::contains(diff.output, "rank 1: no tracetorch_shards.json"));

  // Killed before its forward: rank 0 waits in an all-reduce on a dead peer; the group comes down
  // (exit 1, not timeout's 124) and the diff reports the missing ranks.
  const auto early = tpl::run_bounded("TRACETORCH_FAULT_KILL_RANK=1 TRACETORCH_FAULT_KILL_AT=forward", TRACETORCH_LLAMA_TRACE,
                                      "--world-size 2 " + tpl::upstream_arguments(dir / "early"), dir.path());
  DOCTEST_INFO(early.errors);
  DOCTEST_CHECK(early.exit_code == 1);
  const auto early_diff =
      tracetorch_test::run_diff((tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " + (dir / "early").string());
  DOCTEST_CHECK(early_diff.exit_code == 2);
  DOCTEST_CHECK(tracetorch_test::contains(early_diff.output, "rank 1: no trace"));
}

DOCTEST_TEST_CASE("ranks started alone with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun starts them") {
  tracetorch_test::TempDir dir;
  const std::string port = "MASTER_PORT=" + std::to_string(tracetorch::detail::free_loopback_port());
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 " + port;
  // Rank 1 in the background of the same shell, rank 0 in front; `wait` collects rank 1's status.
  const auto both = tracetorch_test::run_program(
      "(timeout --kill-after=10 300 env RANK=1 " + env + " " + TRACETORCH_LLAMA_TRACE + " " + tpl::upstream_arguments(dir / "tp") +
          " > " + (dir / "rank1.txt").string() + " 2>&1 & timeout --kill-after=10 300 env RANK=0 " + env + " " +
          TRACETORCH_LLAMA_TRACE,
      tpl::upstream_arguments(dir / "tp") + "; rank0=$?; wait $!; rank1=$?; exit $((rank0 | rank1)))");
  DOCTEST_INFO(both.output);
  DOCTEST_CHECK(both.exit_code == 0);
  const auto diff = tracetorch_test::run_diff((tracetorch_test::tiny_llama_dir() / "trace_st").string() + " " + (dir / "tp").string());
  DOCTEST_INFO(diff.output);
  DOCTEST_CHECK(diff.exit_code == 0);
}

DOCTEST_TEST_CASE("a rank of a single-process program writes nothing and says so on stderr") {
  tracetorch_test::TempDir dir;
  const auto run = tpl::run_bounded("RANK=1", TRACETORCH_LLAMA_TRACE, tpl::upstream_arguments(dir / "trace"), dir.path());
  DOCTEST_CHECK(run.exit_code == 0);
  DOCTEST_CHECK(run.output.empty());
  DOCTEST_CHECK(tracetorch_test::contains(run.errors, "rank 1 writes nothing"));
  DOCTEST_CHECK(!std::filesystem::exists(dir / "trace"));
}

DOCTEST_TEST_CASE("module replay on 2 ranks: each rank's shards on its slices of upstream's values; a planted o_proj slice diverges") {
  tracetorch_test::TempDir dir;
  const std::string reference = (tracetorch_test::tiny_llama_dir() / "trace_st").string();
  const std::string arguments = "--world-size 2 --config " + tpl::fixture("config.json") + " --weights " + tpl::fixture("model.safetensors") +
                                " --input-ids " + tpl::fixture("input_ids.safetensors") + " --replay " + reference;
  const auto clean = tpl::run_bounded("", TRACETORCH_LLAMA_TRACE, arguments + " --json " + (dir / "replay.json").string(), dir.path());
  DOCTEST_INFO(clean.output, clean.errors);
  DOCTEST_CHECK(clean.exit_code == 0);
  for (const std::string rank : {"0", "1"}) {
    DOCTEST_CHECK(tracetorch_test::contains(clean.output, "rank " + rank + " of 2: replay of LlamaModel against"));
    const auto json = tpl::read_json(dir / ("replay.rank_" + rank + ".json"));
    std::size_t matched = 0, sliced_linears = 0;
    for (const auto& call : json.as_array()) {
      const std::string status(call.at("status").as_string()), path(call.at("path").as_string());
      DOCTEST_CHECK_MESSAGE(status != "diverges", path);
      if (status == "match") ++matched;
      if (status == "match" && (path.ends_with("q_proj") || path.ends_with("o_proj") || path.ends_with("down_proj"))) ++sliced_linears;
    }
    DOCTEST_CHECK(matched > 20);
    DOCTEST_CHECK(sliced_linears == 12);  // q, o, down of each of the 4 layers, colwise and rowwise
  }

  // Rank 1's o_proj takes rank 0's slice: its partial sum is wrong, and the all-reduce carries it
  // to both ranks, so both name o_proj (the diff of the traces names the rank, above).
  const auto planted = tpl::run_bounded("LLAMA_TP_FAULT_O_PROJ_OFFSET=1:0", TRACETORCH_LLAMA_TRACE, arguments, dir.path());
  DOCTEST_INFO(planted.output, planted.errors);
  DOCTEST_CHECK(planted.exit_code == 1);
  DOCTEST_CHECK(tracetorch_test::contains(planted.output, "LlamaModel.layers.0.self_attn.o_proj (call 0)"));
  DOCTEST_CHECK(!tracetorch_test::contains(planted.output, "LlamaModel.layers.0.self_attn.q_proj (call 0)"));
}

}  // DOCTEST_TEST_SUITE

#endif  // TRACETORCH_TEST_C10D
