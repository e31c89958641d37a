#pragma once
/// \file
/// Loading an ordinary (unsharded, or transformers-sharded) checkpoint into a tensor-parallel
/// model: each parallel linear's tensors are checked and read at their full shape, then the
/// rank keeps its slice. The strict loader's checks (names, shapes, dtypes) apply unchanged.

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "tracetorch/detail/nn/state_dict.hpp"
#include "tracetorch/detail/parallel/linear.hpp"
#include "tracetorch/detail/parallel/rank_trace.hpp"

namespace tracetorch::detail {

/// A parameter of a parallel linear, loaded at full size into `full`, then sliced into `local`.
struct ShardedTarget {
  torch::Tensor local, full;
  const ParallelLinearImpl* layer = nullptr;
  bool is_weight = true;
};

/// Every parallel linear of `model` by its path ("layers.0.self_attn.q_proj").
inline std::map<std::string, const ParallelLinearImpl*> parallel_linears_of(const torch::nn::Module& model) {
  std::map<std::string, const ParallelLinearImpl*> found;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (const auto* layer = dynamic_cast<const ParallelLinearImpl*>(item.value().get())) found.emplace(item.key(), layer);
  }
  return found;
}

/// Replaces, in `targets` (the model's state dict), each parallel linear's tensor by an empty
/// one of the full layer's shape; returns them, to be sliced back by copy_shards.
inline std::vector<ShardedTarget> widen_sharded_targets(const torch::nn::Module& model, nn::detail::NamedTensorList& targets) {
  const auto layers = parallel_linears_of(model);
  std::vector<ShardedTarget> sharded;
  for (auto& [name, tensor] : targets) {
    const auto dot = name.rfind('.');
    if (dot == std::string::npos) continue;
    const auto layer = layers.find(name.substr(0, dot));
    if (layer == layers.end()) continue;
    const auto* linear = layer->second;
    const bool is_weight = name.substr(dot + 1) == "weight";
    const auto full_shape = is_weight ? std::vector<std::int64_t>{linear->out_features, linear->in_features}
                                      : std::vector<std::int64_t>{linear->out_features};
    sharded.push_back({tensor, torch::empty(full_shape, tensor.options()), linear, is_weight});
    tensor = sharded.back().full;
  }
  return sharded;
}

/// Copies each loaded full tensor's slice into the model's own parameter.
inline void copy_shards(const std::vector<ShardedTarget>& sharded) {
  torch::NoGradGuard no_grad;
  for (const auto& target : sharded) {
    target.local.copy_(target.is_weight ? target.layer->slice_of_weight(target.full) : target.layer->slice_of_bias(target.full));
  }
}

/// Each parallel linear of `model` as the trace's module `root.<path>`, with its split features.
inline std::vector<ModuleShard> parallel_layout_of(const torch::nn::Module& model, const std::string& root) {
  std::vector<ModuleShard> layout;
  for (const auto& [path, layer] : parallel_linears_of(model)) layout.push_back({root + "." + path, layer->style, layer->shard});
  return layout;
}

}  // namespace tracetorch::detail
