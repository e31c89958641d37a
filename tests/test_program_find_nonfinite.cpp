// tracetorch/trace_program.hpp's --find-nonfinite: the non-finite sentinel in a trace program
// (llama_trace), on weights with one NaN planted in layer 1's down_proj.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <tracetorch/safetensors.hpp>

#include <limits>

namespace program_find_nonfinite_test {

/// The tiny Llama's checkpoint with NaN at down_proj.weight[5][7] of layer 1, written to `path`.
void write_weights_with_nan(const std::filesystem::path& path) {
  auto weights = tracetorch::safetensors::load(tracetorch_test::tiny_llama_dir() / "model.safetensors");
  weights.at("layers.1.mlp.down_proj.weight")[5][7] = std::numeric_limits<float>::quiet_NaN();
  tracetorch::safetensors::save(path, tracetorch::safetensors::NamedTensors(weights.begin(), weights.end()));
}

std::string arguments(const std::filesystem::path& weights) {
  const auto dir = tracetorch_test::tiny_llama_dir();
  return "--config " + (dir / "config.json").string() + " --weights " + weights.string() + " --input-ids " +
         (dir / "input_ids.safetensors").string() + " --find-nonfinite";
}

}  // namespace program_find_nonfinite_test

DOCTEST_TEST_SUITE("trace programs") {

DOCTEST_TEST_CASE("llama_trace --find-nonfinite: a NaN weight's module is named, exit 3, with or without a trace; clean weights exit 0") {
  using namespace program_find_nonfinite_test;
  tracetorch_test::TempDir dir;
  write_weights_with_nan(dir / "nan.safetensors");
  // Without --debug-path: the sentinel alone, no trace written.
  auto result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments(dir / "nan.safetensors"));
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 3);
  DOCTEST_CHECK(result.output.find("first non-finite: LlamaModel.layers.1.mlp.down_proj (call 1) outputs: ") !=
                std::string::npos);
  DOCTEST_CHECK(result.output.find("elements NaN") != std::string::npos);
  DOCTEST_CHECK(result.output.find("wrote ") == std::string::npos);
  // With --debug-path: the trace is written and the same call named.
  result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE,
                                        arguments(dir / "nan.safetensors") + " --debug-path " + (dir / "trace").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 3);
  DOCTEST_CHECK(result.output.find("first non-finite: LlamaModel.layers.1.mlp.down_proj (call 1)") != std::string::npos);
  DOCTEST_CHECK(std::filesystem::exists(dir / "trace" / "LlamaModel_debug_tree_SUMMARY.json"));
  // The checkpoint as shipped: nothing found, exit 0.
  result = tracetorch_test::run_program(TRACETORCH_LLAMA_TRACE, arguments(tracetorch_test::tiny_llama_dir() / "model.safetensors"));
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(result.output.find("no non-finite value") != std::string::npos);
}

}  // DOCTEST_TEST_SUITE
