// tracetorch::Replaceable / register_replaceable: patch mapping that builds the replacement (a
// toy of Qwen2-MoE's block: a top-k router and experts with the eager loop over the experts hit,
// each swapped for a fused class through the registry alone).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>

#include "diff_helpers.hpp"
#include "test_helpers.hpp"

namespace patch_build_toys {

struct PbConfig {
  std::int64_t hidden = 6;
  std::int64_t intermediate = 4;
  std::int64_t experts = 4;
  std::int64_t top_k = 2;
};

struct PbActImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return torch::silu(x); }
};
TRACEABLE(PbAct);

using RouterResult = std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>;

/// Qwen2MoeTopKRouter: (router probabilities, renormalised top-k weights, top-k indices).
struct PbRouterImpl : torch::nn::Module {
  explicit PbRouterImpl(const PbConfig& config) : top_k(config.top_k) {
    weight = register_parameter("weight", torch::randn({config.experts, config.hidden}));
  }
  RouterResult forward(const torch::Tensor& hidden_states) {
    const auto logits = torch::softmax(torch::nn::functional::linear(hidden_states, weight), -1, torch::kFloat);
    auto [values, indices] = torch::topk(logits, top_k, -1);
    return {logits, values / values.sum(-1, /*keepdim=*/true), indices};
  }
  std::int64_t top_k;
  torch::Tensor weight;
};
TRACEABLE(PbRouter);

/// The same router computed another way (a matmul): what a replacement router would be.
struct PbFusedRouterImpl : torch::nn::Module {
  explicit PbFusedRouterImpl(const PbConfig& config) : top_k(config.top_k) {
    weight = register_parameter("weight", torch::zeros({config.experts, config.hidden}));
  }
  RouterResult forward(const torch::Tensor& hidden_states) {
    const auto logits = torch::softmax(torch::matmul(hidden_states, weight.t()), -1, torch::kFloat);
    auto [values, indices] = torch::topk(logits, top_k, -1);
    return {logits, values / values.sum(-1, /*keepdim=*/true), indices};
  }
  std::int64_t top_k;
  torch::Tensor weight;
};
TRACEABLE(PbFusedRouter);

/// Qwen2MoeExperts: fused gate_up_proj [E, 2I, H] and down_proj [E, H, I], the eager loop over
/// the experts hit (act_fn once per expert hit).
struct PbExpertsImpl : torch::nn::Module {
  explicit PbExpertsImpl(const PbConfig& config) : experts(config.experts) {
    gate_up_proj = register_parameter("gate_up_proj", torch::randn({config.experts, 2 * config.intermediate, config.hidden}));
    down_proj = register_parameter("down_proj", torch::randn({config.experts, config.hidden, config.intermediate}));
    act_fn = register_module("act_fn", PbAct());
  }
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& top_k_index, const torch::Tensor& top_k_weights) {
    auto out = torch::zeros_like(hidden);
    const auto mask = torch::one_hot(top_k_index, experts).permute({2, 1, 0});
    const auto hit = torch::greater(mask.sum({-1, -2}), 0).nonzero();
    for (std::int64_t i = 0; i < hit.size(0); ++i) {
      const auto expert = hit[i][0].item<std::int64_t>();
      const auto where = torch::where(mask[expert]);
      const auto& top_k_pos = where[0];
      const auto& token_idx = where[1];
      const auto gate_up = torch::nn::functional::linear(hidden.index_select(0, token_idx), gate_up_proj[expert]).chunk(2, -1);
      auto current = torch::nn::functional::linear(act_fn(gate_up[0]) * gate_up[1], down_proj[expert]);
      current = current * top_k_weights.index({token_idx, top_k_pos}).unsqueeze(-1);
      out.index_add_(0, token_idx, current);
    }
    return out;
  }
  std::int64_t experts;
  torch::Tensor gate_up_proj, down_proj;
  PbAct act_fn{nullptr};
};
TRACEABLE(PbExperts);

/// The same experts as one batched op over (token, k) pairs: act_fn called once.
struct PbFusedExpertsImpl : torch::nn::Module {
  explicit PbFusedExpertsImpl(const PbConfig& config) {
    gate_up_proj = register_parameter("gate_up_proj", torch::zeros({config.experts, 2 * config.intermediate, config.hidden}));
    down_proj = register_parameter("down_proj", torch::zeros({config.experts, config.hidden, config.intermediate}));
    act_fn = register_module("act_fn", PbAct());
  }
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& top_k_index, const torch::Tensor& top_k_weights) {
    const auto tokens = hidden.size(0);
    const auto k = top_k_index.size(1);
    const auto chosen = top_k_index.reshape({-1});
    const auto repeated = hidden.repeat_interleave(k, 0).unsqueeze(-1);
    const auto gate_up = torch::bmm(gate_up_proj.index_select(0, chosen), repeated).squeeze(-1).chunk(2, -1);
    const auto inner = (act_fn(gate_up[0]) * gate_up[1]).unsqueeze(-1);
    const auto out = torch::bmm(down_proj.index_select(0, chosen), inner).squeeze(-1) * top_k_weights.reshape({-1, 1});
    return out.view({tokens, k, -1}).sum(1);
  }
  torch::Tensor gate_up_proj, down_proj;
  PbAct act_fn{nullptr};
};
TRACEABLE(PbFusedExperts);

/// Experts whose forward takes other arguments: refused when built in place of PbExperts.
struct PbOddExpertsImpl : torch::nn::Module {
  explicit PbOddExpertsImpl(const PbConfig&) {}
  explicit PbOddExpertsImpl(int) {}
  torch::Tensor forward(const torch::Tensor& hidden) { return hidden; }
};
TRACEABLE(PbOddExperts);

/// Qwen2MoeSparseMoeBlock's routed part: each replaceable submodule declared in one line.
struct PbBlockImpl : torch::nn::Module {
  explicit PbBlockImpl(const PbConfig& config) {
    gate = tracetorch::register_replaceable<PbRouter>(*this, "gate", config);
    experts = tracetorch::register_replaceable<PbExperts>(*this, "experts", config);
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) {
    const auto flat = hidden_states.reshape({-1, hidden_states.size(-1)});
    const auto [logits, weights, indices] = gate(flat);
    return hidden_states + experts(flat, indices, weights).view(hidden_states.sizes());
  }
  tracetorch::Replaceable<PbRouter> gate{nullptr};
  tracetorch::Replaceable<PbExperts> experts{nullptr};
};
TRACEABLE(PbBlock);

struct PbOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> router_logits;
};
TRACETORCH_OUTPUT(PbOutput, last_hidden_state, router_logits);

struct PbModelImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"router_logits", tracetorch::OutputRecorder<PbRouter, 0>>());
  explicit PbModelImpl(const PbConfig& config) {
    layers = register_module("layers", torch::nn::ModuleList(PbBlock(config), PbBlock(config)));
  }
  PbOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      auto h = x;
      for (std::size_t i = 0; i < layers->size(); ++i) h = layers[i]->as<PbBlock>()->forward(h);
      return PbOutput{.last_hidden_state = h};
    });
  }
  auto& block(std::size_t i) { return *layers[i]->as<PbBlock>(); }
  torch::nn::ModuleList layers{nullptr};
};
TRACEABLE(PbModel);

/// Clears the registry and unpatches the recorders however the test ends.
struct PbRegistryReset {
  ~PbRegistryReset() {
    tracetorch::clear_patch_mapping();
    tracetorch::unpatch_output_recorders();
  }
};

void register_fused_moe() {
  tracetorch::register_patch_mapping({{"PbExperts", tracetorch::replacement<PbFusedExperts, PbConfig>()},
                                      {"^PbRout", tracetorch::replacement<PbFusedRouter, PbConfig>()}});
}

/// Copies `from`'s parameters into `to`, by name (the replacements keep the originals' names).
void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto source = from.named_parameters();
  const auto target = to.named_parameters();
  DOCTEST_REQUIRE(source.size() == target.size());
  for (const auto& item : target) item.value().copy_(source[item.key()]);
}

/// The debugger's FULL_TENSORS tree of one call of `model`, written under `dir`.
std::filesystem::path trace_into(PbModel& model, const torch::Tensor& x, const std::filesystem::path& dir) {
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .use_repr = false});
    model(x);
  }
  return dir / "PbModel_debug_tree_FULL_TENSORS.json";
}

/// How many calls of modules whose path ends with `suffix` a debugger tree holds.
std::size_t calls_ending_with(const boost::json::value& node, const std::string& suffix) {
  const auto& object = node.as_object();
  const std::string path(object.at("module_path").as_string());
  std::size_t count = path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (const auto* children = object.if_contains("children")) {
    for (const auto& child : children->as_array()) count += calls_ending_with(child, suffix);
  }
  return count;
}

}  // namespace patch_build_toys

DOCTEST_TEST_SUITE("capture") {

using namespace patch_build_toys;

DOCTEST_TEST_CASE("Replaceable: the registry alone builds the replacement, clear_patch_mapping restores the original") {
  PbRegistryReset reset;
  const PbConfig config;
  PbModel before(config);
  DOCTEST_CHECK_FALSE(before->block(0).gate.replaced());
  DOCTEST_CHECK(before->block(1).experts.as<PbExperts>() != nullptr);

  register_fused_moe();
  PbModel fused(config);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_CHECK(fused->block(i).gate.replaced());
    DOCTEST_CHECK(fused->block(i).gate.as<PbFusedRouter>() != nullptr);  // matched by the pattern "^PbRout"
    DOCTEST_CHECK(fused->block(i).experts.as<PbFusedExperts>() != nullptr);
    DOCTEST_CHECK(fused->block(i).experts.as<PbExperts>() == nullptr);
  }
  // Registered where the original was: the same parameter names, the replacement's submodules.
  DOCTEST_CHECK(fused->named_parameters().keys() == before->named_parameters().keys());
  DOCTEST_CHECK(fused->named_modules().contains("layers.0.experts.act_fn"));

  tracetorch::clear_patch_mapping();
  DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("PbExperts").has_value());
  PbModel after(config);
  DOCTEST_CHECK(after->block(0).experts.as<PbExperts>() != nullptr);
  DOCTEST_CHECK(after->block(0).gate.as<PbRouter>() != nullptr);
  DOCTEST_CHECK_FALSE(after->block(1).experts.replaced());
}

DOCTEST_TEST_CASE("Replaceable: a replacement registered without the constructor arguments or with another forward is refused") {
  PbRegistryReset reset;
  const PbConfig config;
  tracetorch::register_patch_mapping({{"PbExperts", tracetorch::replacement<PbFusedExperts>()}});
  DOCTEST_CHECK_THROWS_WITH_AS(PbModel{config}, doctest::Contains("register it as tracetorch::replacement<PbFusedExperts, "),
                               tracetorch::Error);
  tracetorch::register_patch_mapping({{"PbExperts", tracetorch::replacement<PbOddExperts, PbConfig>()}}, /*overwrite=*/true);
  DOCTEST_CHECK_THROWS_WITH_AS(PbModel{config}, doctest::Contains("PbOddExperts: its forward is"), tracetorch::Error);
  tracetorch::register_patch_mapping({{"PbExperts", tracetorch::replacement<PbOddExperts, int>()}}, /*overwrite=*/true);
  DOCTEST_CHECK_THROWS_WITH_AS(PbModel{config}, doctest::Contains("(it was registered with std::tuple<int>)"),
                               tracetorch::Error);
}

DOCTEST_TEST_CASE("Replaceable: trace and captured router logits agree before and after the swap; reviewed diff rules exit 0") {
  PbRegistryReset reset;
  torch::manual_seed(3);
  const PbConfig config;
  const auto x = torch::randn({2, 5, config.hidden});
  const tracetorch::OutputOptions wanted{.output = {{"router_logits", true}}};
  PbModel eager(config);
  const auto reference = eager(x, wanted);

  register_fused_moe();
  PbModel fused(config);
  copy_parameters(*eager, *fused);
  // Registered, not patched: the recorder still looks for PbRouter, which this model lacks (as upstream).
  DOCTEST_CHECK(fused(x, wanted).router_logits->empty());
  const auto patched = tracetorch::patch_output_recorders(fused);
  DOCTEST_REQUIRE(patched.size() == 1);
  DOCTEST_CHECK(patched[0].replacement == "PbFusedRouter");
  const auto swapped = fused(x, wanted);
  DOCTEST_CHECK(torch::allclose(swapped.last_hidden_state, reference.last_hidden_state, 1e-4, 1e-5));
  DOCTEST_REQUIRE(swapped.router_logits->size() == 2);
  DOCTEST_REQUIRE(reference.router_logits->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_CHECK(torch::allclose((*swapped.router_logits)[i], (*reference.router_logits)[i], 1e-5, 1e-6));
  }

  tracetorch_test::TempDir dir;
  const auto eager_tree = tracetorch_test::read_json(trace_into(eager, x, dir / "eager"));
  const auto fused_tree = tracetorch_test::read_json(trace_into(fused, x, dir / "fused"));
  const auto eager_act = calls_ending_with(eager_tree, ".experts.act_fn");
  DOCTEST_CHECK(calls_ending_with(fused_tree, ".experts.act_fn") == 2);  // once per layer
  DOCTEST_CHECK(eager_act > 2);                                          // once per expert hit
  DOCTEST_CHECK(calls_ending_with(fused_tree, ".gate") == calls_ending_with(eager_tree, ".gate"));

  const auto rules = tracetorch_test::data_dir() / "patch_mapping_build" / "fused_experts.accept";
  const auto paths = (dir / "eager").string() + " " + (dir / "fused").string();
  const auto unreviewed = tracetorch_test::run_diff(paths);
  DOCTEST_CHECK_MESSAGE(unreviewed.exit_code == 1, unreviewed.output);
  const auto reviewed = tracetorch_test::run_diff(paths + " --accept " + rules.string());
  DOCTEST_CHECK_MESSAGE(reviewed.exit_code == 0, reviewed.output);
  DOCTEST_CHECK_FALSE(tracetorch_test::contains(reviewed.output, "stale rule"));
}

}  // DOCTEST_TEST_SUITE
