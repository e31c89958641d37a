// The Qwen2-MoE port's own modules (the router, the eager experts, the sparse block) and the
// shared decoder parts instantiated for its family, compiled here once.
#include "qwen2_moe.hpp"

#include <algorithm>

template struct tracetorch::models::RMSNormImpl<qwen2_moe::Qwen2Moe>;
template struct tracetorch::models::GatedMLPImpl<qwen2_moe::Qwen2Moe>;
template struct tracetorch::models::AttentionImpl<qwen2_moe::Qwen2Moe>;
template struct tracetorch::models::DecoderLayerImpl<qwen2_moe::Qwen2Moe>;
template struct tracetorch::models::ModelImpl<qwen2_moe::Qwen2Moe>;

namespace qwen2_moe {

bool Qwen2MoeConfig::is_sparse_layer(std::int64_t layer_idx) const {
  const bool dense = std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer_idx) != mlp_only_layers.end();
  return !dense && num_experts > 0 && (layer_idx + 1) % decoder_sparse_step == 0;
}

torch::nn::AnyModule Qwen2Moe::make_mlp(const Qwen2MoeConfig& config, std::int64_t layer_idx) {
  if (config.is_sparse_layer(layer_idx)) return torch::nn::AnyModule(Qwen2MoeSparseMoeBlock(config));
  return torch::nn::AnyModule(Qwen2MoeMLP(config, config.intermediate_size));
}

Qwen2MoeTopKRouterImpl::Qwen2MoeTopKRouterImpl(const Qwen2MoeConfig& config)
    : top_k(config.num_experts_per_tok),
      num_experts(config.num_experts),
      hidden_dim(config.hidden_size),
      norm_topk_prob(config.norm_topk_prob) {
  weight = register_parameter("weight", torch::zeros({num_experts, hidden_dim}));
}

RouterOutput Qwen2MoeTopKRouterImpl::forward(const torch::Tensor& hidden_states) {
  const auto flat = hidden_states.reshape({-1, hidden_dim});
  auto router_logits = torch::nn::functional::linear(flat, weight);  // (tokens, num_experts)
  router_logits = torch::softmax(router_logits, -1, torch::kFloat);
  auto [top_value, indices] = torch::topk(router_logits, top_k, -1);
  if (norm_topk_prob) top_value = top_value / top_value.sum(-1, /*keepdim=*/true);
  return {router_logits, top_value.to(router_logits.scalar_type()), indices};
}

Qwen2MoeExpertsImpl::Qwen2MoeExpertsImpl(const Qwen2MoeConfig& config)
    : num_experts(config.num_experts), hidden_dim(config.hidden_size), intermediate_dim(config.moe_intermediate_size) {
  gate_up_proj = register_parameter("gate_up_proj", torch::empty({num_experts, 2 * intermediate_dim, hidden_dim}));
  down_proj = register_parameter("down_proj", torch::empty({num_experts, hidden_dim, intermediate_dim}));
  act_fn = tracetorch::nn::get_activation(config.hidden_act);
  register_module("act_fn", act_fn.ptr());
}

torch::Tensor Qwen2MoeExpertsImpl::forward(const torch::Tensor& hidden_states, const torch::Tensor& top_k_index,
                                           const torch::Tensor& top_k_weights) {
  auto final_hidden_states = torch::zeros_like(hidden_states);
  torch::Tensor expert_mask, expert_hit;
  {
    torch::NoGradGuard no_grad;
    expert_mask = torch::one_hot(top_k_index, num_experts).permute({2, 1, 0});  // [E, k, tokens]
    expert_hit = torch::greater(expert_mask.sum({-1, -2}), 0).nonzero();
  }
  for (std::int64_t i = 0; i < expert_hit.size(0); ++i) {
    const auto expert = expert_hit[i][0].item<std::int64_t>();
    const auto where = torch::where(expert_mask[expert]);
    const auto& top_k_pos = where[0];
    const auto& token_idx = where[1];
    const auto current_state = hidden_states.index({token_idx});
    const auto gate_up = torch::nn::functional::linear(current_state, gate_up_proj[expert]).chunk(2, -1);
    auto current = act_fn.forward(gate_up[0]) * gate_up[1];
    current = torch::nn::functional::linear(current, down_proj[expert]);
    current = current * top_k_weights.index({token_idx, top_k_pos}).unsqueeze(-1);
    final_hidden_states.index_add_(0, token_idx, current.to(final_hidden_states.scalar_type()));
  }
  return final_hidden_states;
}

Qwen2MoeSparseMoeBlockImpl::Qwen2MoeSparseMoeBlockImpl(const Qwen2MoeConfig& config) {
  gate = tracetorch::register_replaceable<Qwen2MoeTopKRouter>(*this, "gate", config);
  experts = tracetorch::register_replaceable<Qwen2MoeExperts>(*this, "experts", config);
  shared_expert = register_module("shared_expert", Qwen2MoeMLP(config, config.shared_expert_intermediate_size));
  shared_expert_gate = register_module(
      "shared_expert_gate", tracetorch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, 1).bias(false)));
}

torch::Tensor Qwen2MoeSparseMoeBlockImpl::forward(const torch::Tensor& hidden_states) {
  const auto batch_size = hidden_states.size(0), sequence_length = hidden_states.size(1), hidden_dim = hidden_states.size(2);
  const auto reshaped = hidden_states.view({-1, hidden_dim});
  auto shared_expert_output = shared_expert(reshaped);
  const auto [router_logits, routing_weights, selected_experts] = gate(reshaped);
  auto expert_output = experts(reshaped, selected_experts, routing_weights);
  shared_expert_output = torch::sigmoid(shared_expert_gate(reshaped)) * shared_expert_output;
  expert_output += shared_expert_output;
  return expert_output.reshape({batch_size, sequence_length, hidden_dim});
}

}  // namespace qwen2_moe
