#pragma once
/// \file
/// transformers' `DynamicCache` (cache_utils.py): the key/value cache newer transformers models
/// build when `use_cache` is on and hand to every decoder layer as `past_key_values`. A trace
/// records it by upstream's repr, `DynamicCache(layers=[DynamicLayer, DynamicLayer])`.
///
/// \code
/// tracetorch::DynamicCache cache(config.num_hidden_layers);   // upstream: DynamicCache(config=config)
/// tracetorch::DynamicCache mixed({4096, std::nullopt});       // a sliding layer, then a full one
/// std::tie(k, v) = cache.update(k, v, layer_idx);             // keys/values so far, this step's appended
/// \endcode

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
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
  /// One layer per entry, as upstream's `DynamicCache(config=...)` makes them from the config's
  /// layer types: a `DynamicSlidingWindowLayer` where the entry holds the layer's sliding window,
  /// which keeps only the last `window - 1` tokens, else a `DynamicLayer`, which keeps them all.
  explicit DynamicCache(const std::vector<std::optional<std::int64_t>>& layer_windows) {
    for (const auto& window : layer_windows) {
      if (window && *window <= 0) throw Error("DynamicCache: sliding window " + std::to_string(*window) + " must be positive");
      layers_.push_back(Layer{.window = window});
    }
  }

  /// Appends this step's keys and values ([batch, heads, seq, head_dim]) to layer `layer_idx`
  /// along the sequence dimension and returns the layer's keys and values so far (a sliding
  /// layer: those it kept, then this step's; it keeps the last window - 1 of them).
  std::pair<torch::Tensor, torch::Tensor> update(const torch::Tensor& key_states, const torch::Tensor& value_states,
                                                 std::int64_t layer_idx) {
    if (layer_idx < 0) throw Error("DynamicCache::update: negative layer index " + std::to_string(layer_idx));
    if (static_cast<std::size_t>(layer_idx) >= layers_.size()) layers_.resize(static_cast<std::size_t>(layer_idx) + 1);
    auto& layer = layers_[static_cast<std::size_t>(layer_idx)];
    torch::Tensor keys = key_states, values = value_states;
    if (layer.keys.defined()) {
      keys = torch::cat({layer.keys, key_states}, -2);
      values = torch::cat({layer.values, value_states}, -2);
    }
    layer.seen += key_states.size(-2);
    if (layer.window) {
      // Python's full[:, :, -window + 1:, :]: a window of 1 slices from 0, keeping every token.
      const auto kept = *layer.window - 1;
      const auto start = kept == 0 ? 0 : std::max<std::int64_t>(keys.size(-2) - kept, 0);
      layer.keys = keys.slice(-2, start);
      layer.values = values.slice(-2, start);
    } else {
      layer.keys = keys;
      layer.values = values;
    }
    return {keys, values};
  }

  /// Tokens seen by layer `layer_idx` (0 for a layer not yet filled), those a sliding layer
  /// dropped included, as upstream's get_seq_length.
  std::int64_t get_seq_length(std::int64_t layer_idx = 0) const {
    if (layer_idx < 0 || static_cast<std::size_t>(layer_idx) >= layers_.size()) return 0;
    return layers_[static_cast<std::size_t>(layer_idx)].seen;
  }

  /// Upstream's get_mask_sizes: (kv_length, kv_offset) of the mask for `query_length` new tokens
  /// at layer `layer_idx`, before its update: every token so far and these for a full layer (offset
  /// 0); for a sliding layer the ones it kept and these, from the first one kept.
  std::pair<std::int64_t, std::int64_t> get_mask_sizes(std::int64_t query_length, std::int64_t layer_idx = 0) const {
    const auto seen = get_seq_length(layer_idx);
    const auto window = layer_idx >= 0 && static_cast<std::size_t>(layer_idx) < layers_.size()
                            ? layers_[static_cast<std::size_t>(layer_idx)].window
                            : std::nullopt;
    if (!window) return {seen + query_length, 0};
    const auto kept = seen >= *window ? *window - 1 : seen;
    return {kept + query_length, std::max<std::int64_t>(seen - *window + 1, 0)};
  }

  /// The number of layers (made up front or reached by `update`).
  std::size_t size() const noexcept { return layers_.size(); }
  /// Layer `layer_idx`'s sliding window, none for a layer that keeps every token.
  std::optional<std::int64_t> sliding_window(std::size_t layer_idx) const { return layers_.at(layer_idx).window; }
  /// Layer `layer_idx`'s keys and values kept (undefined before its first update).
  const torch::Tensor& keys(std::size_t layer_idx) const { return layers_.at(layer_idx).keys; }
  const torch::Tensor& values(std::size_t layer_idx) const { return layers_.at(layer_idx).values; }

 private:
  struct Layer {
    std::optional<std::int64_t> window;  // a DynamicSlidingWindowLayer's
    torch::Tensor keys, values;
    std::int64_t seen = 0;  // upstream's cumulative_length
  };
  std::vector<Layer> layers_;
};

/// Upstream's repr: `Cache.__repr__` lists its layers, each shown by its class name.
inline std::string tracetorch_repr(const DynamicCache& cache) {
  std::string text = "DynamicCache(layers=[";
  for (std::size_t i = 0; i < cache.size(); ++i) {
    if (i > 0) text += ", ";
    text += cache.sliding_window(i) ? "DynamicSlidingWindowLayer" : "DynamicLayer";
  }
  return text + "])";
}

}  // namespace tracetorch
