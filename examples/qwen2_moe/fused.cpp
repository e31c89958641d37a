// The fused replacements of the Qwen2-MoE port's experts and router.
#include "fused.hpp"

namespace qwen2_moe {

FusedExpertsImpl::FusedExpertsImpl(const Qwen2MoeConfig& config) {
  const auto experts = config.num_experts, hidden = config.hidden_size, inner = config.moe_intermediate_size;
  gate_up_proj = register_parameter("gate_up_proj", torch::empty({experts, 2 * inner, hidden}));
  down_proj = register_parameter("down_proj", torch::empty({experts, hidden, inner}));
  act_fn = tracetorch::nn::get_activation(config.hidden_act);
  register_module("act_fn", act_fn.ptr());
}

torch::Tensor FusedExpertsImpl::forward(const torch::Tensor& hidden_states, const torch::Tensor& top_k_index,
                                        const torch::Tensor& top_k_weights) {
  const auto tokens = hidden_states.size(0), k = top_k_index.size(1);
  const auto chosen = top_k_index.reshape({-1});                                   // [tokens * k]
  const auto pairs = hidden_states.repeat_interleave(k, 0).unsqueeze(-1);          // [tokens * k, H, 1]
  const auto gate_up = torch::bmm(gate_up_proj.index_select(0, chosen), pairs).squeeze(-1).chunk(2, -1);
  const auto inner = (act_fn.forward(gate_up[0]) * gate_up[1]).unsqueeze(-1);     // [tokens * k, I, 1]
  const auto out = torch::bmm(down_proj.index_select(0, chosen), inner).squeeze(-1) * top_k_weights.reshape({-1, 1});
  return out.view({tokens, k, -1}).sum(1).to(hidden_states.scalar_type());
}

FusedTopKRouterImpl::FusedTopKRouterImpl(const Qwen2MoeConfig& config)
    : top_k(config.num_experts_per_tok), hidden_dim(config.hidden_size), norm_topk_prob(config.norm_topk_prob) {
  weight = register_parameter("weight", torch::zeros({config.num_experts, hidden_dim}));
}

RouterOutput FusedTopKRouterImpl::forward(const torch::Tensor& hidden_states) {
  const auto logits = torch::matmul(hidden_states.reshape({-1, hidden_dim}), weight.t()).to(torch::kFloat);
  const auto indices = std::get<1>(torch::topk(logits, top_k, -1));
  const auto probabilities = torch::softmax(logits, -1);
  auto top_value = probabilities.gather(-1, indices);
  if (norm_topk_prob) top_value = top_value / top_value.sum(-1, /*keepdim=*/true);
  return {probabilities, top_value, indices};
}

void register_fused_moe() {
  tracetorch::register_patch_mapping(
      {{"Qwen2MoeExperts", tracetorch::replacement<FusedExperts, Qwen2MoeConfig>()},
       {"Qwen2MoeTopKRouter", tracetorch::replacement<FusedTopKRouter, Qwen2MoeConfig>()}});
}

}  // namespace qwen2_moe
