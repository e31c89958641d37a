// include/tracetorch/diff.hpp with the checkpoint loader behind examples/llama_trace (issue 25):
// the tiny Llama's weights split in two shards with transformers' index trace exactly as the
// single file does, compared with diff_traces at zero tolerance.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "test_helpers.hpp"

#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

/// transformers' sharded layout in `dir`: model-0000k-of-00002.safetensors (half the tensors
/// each) and model.safetensors.index.json mapping each tensor to its shard.
void write_two_shards(const fs::path& single_file, const fs::path& dir) {
  const auto tensors = tracetorch::safetensors::load(single_file);
  tracetorch::safetensors::NamedTensors first, second;
  boost::json::object weight_map;
  for (const auto& [name, tensor] : tensors) {
    const bool in_first = first.size() < tensors.size() / 2;
    (in_first ? first : second).emplace_back(name, tensor);
    weight_map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  fs::create_directories(dir);
  tracetorch::safetensors::save(dir / "model-00001-of-00002.safetensors", first);
  tracetorch::safetensors::save(dir / "model-00002-of-00002.safetensors", second);
  std::ofstream(dir / "model.safetensors.index.json")
      << boost::json::serialize(boost::json::object{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});
}

}  // namespace

DOCTEST_TEST_SUITE("diff checkpoint") {

DOCTEST_TEST_CASE("a sharded checkpoint traces identically to its single file (llama_trace, then diff at zero tolerance)") {
  tracetorch_test::TempDir dir;
  const auto tiny = tracetorch_test::tiny_llama_dir();
  write_two_shards(tiny / "model.safetensors", dir / "sharded");
  const auto trace = [&](const fs::path& weights, const std::string& out) {
    const auto result = tracetorch_test::run_program(
        TRACETORCH_LLAMA_TRACE, "--config " + (tiny / "config.json").string() +
                                    (weights.empty() ? std::string() : " --weights " + weights.string()) + " --input-ids " +
                                    (tiny / "input_ids.safetensors").string() + " --no-prune-layers --safetensors --debug-path " +
                                    (dir / out).string());
    DOCTEST_INFO(result.output);
    DOCTEST_REQUIRE(result.exit_code == 0);
    return dir / out;
  };
  const auto single = trace(tiny / "model.safetensors", "single");
  const auto sharded = trace(dir / "sharded" / "model.safetensors.index.json", "sharded_trace");
  const auto report = tracetorch::diff_traces(single, sharded, {.atol = 0, .rtol = 0, .precision_tolerance = false});
  DOCTEST_INFO(report.text());
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.counts().total() == 0);
  DOCTEST_CHECK(report.counts().tensors > 100);  // every module's tensors, compared bit for bit
  // The same trace against a random init (no --weights) is not identical: the weights were used.
  const auto random = trace({}, "random");
  DOCTEST_CHECK(!tracetorch::diff_traces(single, random).within_tolerance());
}

}  // DOCTEST_TEST_SUITE
