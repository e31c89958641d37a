// Patch mapping that builds the replacement, on the Qwen2-MoE port: its experts and router are
// declared tracetorch::Replaceable, so register_patch_mapping alone makes every sparse block hold
// the fused classes (examples/qwen2_moe/fused.hpp); the trace and the captured router logits agree
// before and after, the differences reviewed in examples/qwen2_moe/fused.accept.

#include <doctest/doctest.h>

#include <qwen2_moe/fused.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace qwen2_moe_patch_test {

std::filesystem::path bundle() { return tracetorch_test::data_dir() / "qwen2_moe"; }

qwen2_moe::Qwen2MoeModel loaded_model() {
  qwen2_moe::Qwen2MoeModel model(qwen2_moe::Qwen2MoeConfig::from_json_file(bundle() / "config.json"));
  qwen2_moe::load_state_dict(*model, bundle() / "model.safetensors");  // the same names either way
  model->eval();
  return model;
}

qwen2_moe::Qwen2MoeSparseMoeBlockImpl& block(qwen2_moe::Qwen2MoeModel& model, std::size_t layer) {
  auto* found = model->layers[layer]->as<qwen2_moe::Qwen2MoeDecoderLayer>()->mlp.ptr()->as<qwen2_moe::Qwen2MoeSparseMoeBlock>();
  DOCTEST_REQUIRE(found != nullptr);
  return *found;
}

/// Empties the registry and unpatches the recorders however the test ends.
struct MoePatchReset {
  ~MoePatchReset() {
    tracetorch::clear_patch_mapping();
    tracetorch::unpatch_output_recorders();
  }
};

std::filesystem::path traced(qwen2_moe::Qwen2MoeModel& model, const torch::Tensor& ids, const std::filesystem::path& dir) {
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .do_prune_layers = false, .use_repr = false});
  model({.input_ids = ids}, tracetorch::output_options({{"use_cache", false}, {"output_router_logits", true}}));
  return dir;
}

}  // namespace qwen2_moe_patch_test

DOCTEST_TEST_SUITE("qwen2_moe") {

using namespace qwen2_moe_patch_test;

DOCTEST_TEST_CASE("qwen2_moe: register_patch_mapping alone builds FusedExperts and FusedTopKRouter; trace and router_logits agree; reviewed rules exit 0") {
  MoePatchReset reset;
  const auto ids = tracetorch::safetensors::load_single(bundle() / "input_ids.safetensors", "input_ids");
  const auto wanted = tracetorch::output_options({{"use_cache", false}, {"output_router_logits", true}});
  auto eager = loaded_model();
  DOCTEST_CHECK_FALSE(block(eager, 0).experts.replaced());
  const auto reference = eager({.input_ids = ids}, wanted);
  // Traced before patching: patch_output_recorders changes what every Qwen2MoeModel records, as
  // upstream's class-level record map.
  tracetorch_test::TempDir dir;
  const auto eager_trace = traced(eager, ids, dir / "eager");

  qwen2_moe::register_fused_moe();
  auto fused = loaded_model();
  for (const std::size_t layer : {0, 2}) {
    DOCTEST_CHECK(block(fused, layer).experts.as<qwen2_moe::FusedExperts>() != nullptr);
    DOCTEST_CHECK(block(fused, layer).gate.as<qwen2_moe::FusedTopKRouter>() != nullptr);
    DOCTEST_CHECK(block(fused, layer).experts.as<qwen2_moe::Qwen2MoeExperts>() == nullptr);
  }
  DOCTEST_CHECK(fused->named_parameters().keys() == eager->named_parameters().keys());
  // Registered but not patched: the recorder still looks for Qwen2MoeTopKRouter, absent here (as upstream).
  DOCTEST_CHECK(fused({.input_ids = ids}, wanted).router_logits->empty());
  const auto patched = tracetorch::patch_output_recorders(fused);
  DOCTEST_REQUIRE(patched.size() == 3);  // the record map's three recorders, in its order
  DOCTEST_CHECK(patched[0].field == "router_logits");
  DOCTEST_CHECK(patched[0].target == "Qwen2MoeTopKRouter");
  DOCTEST_CHECK(patched[0].replacement == "FusedTopKRouter");
  DOCTEST_CHECK(patched[1].replacement.empty());  // hidden_states: Qwen2MoeDecoderLayer, not replaced
  const auto swapped = fused({.input_ids = ids}, wanted);
  DOCTEST_CHECK(torch::allclose(swapped.last_hidden_state, reference.last_hidden_state, 1e-4, 1e-5));
  DOCTEST_REQUIRE(swapped.router_logits->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_CHECK(torch::allclose((*swapped.router_logits)[i], (*reference.router_logits)[i], 1e-5, 1e-6));
  }

  const auto paths = eager_trace.string() + " " + traced(fused, ids, dir / "fused").string();
  const auto rules = std::filesystem::path(TRACETORCH_TEST_DATA) / ".." / ".." / "examples" / "qwen2_moe" / "fused.accept";
  const auto unreviewed = tracetorch_test::run_diff(paths);
  DOCTEST_CHECK_MESSAGE(unreviewed.exit_code == 1, unreviewed.output);
  DOCTEST_CHECK(tracetorch_test::contains(unreviewed.output, "experts.act_fn"));
  const auto reviewed = tracetorch_test::run_diff(paths + " --accept " + rules.string());
  DOCTEST_CHECK_MESSAGE(reviewed.exit_code == 0, reviewed.output);
  DOCTEST_CHECK_FALSE(tracetorch_test::contains(reviewed.output, "stale rule"));

  tracetorch::clear_patch_mapping();
  auto after = loaded_model();
  DOCTEST_CHECK(block(after, 2).experts.as<qwen2_moe::Qwen2MoeExperts>() != nullptr);
  DOCTEST_CHECK(block(after, 2).gate.as<qwen2_moe::Qwen2MoeTopKRouter>() != nullptr);
}

}  // DOCTEST_TEST_SUITE("qwen2_moe")
