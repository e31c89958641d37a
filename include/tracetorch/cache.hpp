#pragma once
/// \file
/// transformers' `DynamicCache` (cache_utils.py): the key/value cache newer transformers models
/// build when `use_cache` is on and hand to every decoder layer as `past_key_values`. A trace
/// records it by upstream's repr, `DynamicCache(layers=[DynamicLayer, DynamicLayer])`.
///
/// \code
/// tracetorch::DynamicCache cache(config.num_hidden_layers);   // upstream: DynamicCache(config=config)
/// std::tie(k, v) = cache.update(k, v, layer_idx);             // keys/values so far, this step's appended
/// \endcode

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"

namespace tracetorch {

class DynamicCache {
 public:
  /// No layers yet: each `update` for a new layer index appends layers up to it, as upstream's
  /// `DynamicCache()` does.
  DynamicCache() = default;
  /// `num_layers` layers made up front, as upstream's `DynamicCache(config=...)` does for a model
  /// whose layers all use full attention.
  explicit DynamicCache(std::int64_t num_layers) {
    if (num_layers < 0) throw Error("DynamicCache: negative layer count " + std::to_string(num_layers));
    layers_.resize(static_cast<std::size_t>(num_layers));
  }

  /// Appends this step's keys and values ([batch, heads, seq, head_dim]) to layer `layer_idx`
  /// along the sequence dimension and returns the layer's keys and values so far.
  std::pair<torch::Tensor, torch::Tensor> update(const torch::Tensor& key_states, const torch::Tensor& value_states,
                                                 std::int64_t layer_idx) {
    if (layer_idx < 0) throw Error("DynamicCache::update: negative layer index " + std::to_string(layer_idx));
    if (static_cast<std::size_t>(layer_idx) >= layers_.size()) layers_.resize(static_cast<std::size_t>(layer_idx) + 1);
    auto& layer = layers_[static_cast<std::size_t>(layer_idx)];
    if (!layer.keys.defined()) {
      layer.keys = key_states;
      layer.values = value_states;
    } else {
      layer.keys = torch::cat({layer.keys, key_states}, -2);
      layer.values = torch::cat({layer.values, value_states}, -2);
    }
    return {layer.keys, layer.values};
  }

  /// Tokens cached in layer `layer_idx` (0 for a layer not yet filled).
  std::int64_t get_seq_length(std::int64_t layer_idx = 0) const {
    if (layer_idx < 0 || static_cast<std::size_t>(layer_idx) >= layers_.size()) return 0;
    const auto& layer = layers_[static_cast<std::size_t>(layer_idx)];
    return layer.keys.defined() ? layer.keys.size(-2) : 0;
  }

  /// The number of layers (made up front or reached by `update`).
  std::size_t size() const noexcept { return layers_.size(); }
  /// Layer `layer_idx`'s keys and values so far (undefined before its first update).
  const torch::Tensor& keys(std::size_t layer_idx) const { return layers_.at(layer_idx).keys; }
  const torch::Tensor& values(std::size_t layer_idx) const { return layers_.at(layer_idx).values; }

 private:
  struct Layer {
    torch::Tensor keys, values;
  };
  std::vector<Layer> layers_;
};

/// Upstream's repr: `Cache.__repr__` lists its layers, each shown by its class name.
inline std::string tracetorch_repr(const DynamicCache& cache) {
  std::string text = "DynamicCache(layers=[";
  for (std::size_t i = 0; i < cache.size(); ++i) text += i == 0 ? "DynamicLayer" : ", DynamicLayer";
  return text + "])";
}

}  // namespace tracetorch
