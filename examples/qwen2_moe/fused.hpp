#pragma once
// Replacements for the Qwen2-MoE port's experts and router, built through the patch registry
// alone wherever the port declared them Replaceable:
//
//   tracetorch::register_patch_mapping({{"Qwen2MoeExperts", tracetorch::replacement<qwen2_moe::FusedExperts, qwen2_moe::Qwen2MoeConfig>()},
//                                       {"Qwen2MoeTopKRouter", tracetorch::replacement<qwen2_moe::FusedTopKRouter, qwen2_moe::Qwen2MoeConfig>()}});
//   qwen2_moe::Qwen2MoeModel model(config);          // each block's experts and gate are the fused classes
//   tracetorch::patch_output_recorders(model);       // router_logits now recorded from FusedTopKRouter
//
// Both keep the originals' parameter names, so a checkpoint loads into either. The trace
// differences they bring are reviewed in fused.accept beside this file.

#include "qwen2_moe.hpp"

#include <tracetorch/patch_mapping.hpp>

namespace qwen2_moe {

/// The experts as one batched computation over every (token, k) pair: each pair's expert weights
/// gathered, two bmm, act_fn called once (the eager loop calls it once per expert hit).
struct FusedExpertsImpl : torch::nn::Module {
  explicit FusedExpertsImpl(const Qwen2MoeConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& top_k_index,
                        const torch::Tensor& top_k_weights);

  torch::Tensor gate_up_proj, down_proj;  // [E, 2I, H], [E, H, I], as Qwen2MoeExperts
  torch::nn::AnyModule act_fn;
};
TRACEABLE(FusedExperts);

/// The router as a fused top-k softmax kernel computes it: the top-k chosen on the logits (softmax
/// keeps their order), their probabilities gathered from one softmax. Output 0, the
/// probabilities, is what router_logits captures.
struct FusedTopKRouterImpl : torch::nn::Module {
  explicit FusedTopKRouterImpl(const Qwen2MoeConfig& config);
  RouterOutput forward(const torch::Tensor& hidden_states);

  std::int64_t top_k, hidden_dim;
  bool norm_topk_prob;
  torch::Tensor weight;  // [num_experts, hidden], as Qwen2MoeTopKRouter
};
TRACEABLE(FusedTopKRouter);

/// Registers both replacements (for "Qwen2MoeExperts" and "Qwen2MoeTopKRouter").
void register_fused_moe();

}  // namespace qwen2_moe
