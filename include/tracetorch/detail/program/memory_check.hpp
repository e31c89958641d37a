#pragma once
/// \file
/// A trace program refuses, before the model is built, a decoder config whose weights and
/// activations would not fit in this machine's memory or whose sizes overflow when multiplied:
/// a clear line instead of an allocation failure (or a multiplication that wraps) deep in
/// LibTorch. Only configs with transformers' usual decoder keys (vocab_size, hidden_size,
/// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads; head_dim
/// where given) are estimated; others are not checked.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

template <class Config>
concept decoder_config = requires(const Config& c) {
  c.vocab_size; c.hidden_size; c.intermediate_size; c.num_hidden_layers; c.num_attention_heads; c.num_key_value_heads;
};

/// a * b, or nullopt where it overflows.
inline std::optional<std::uint64_t> checked_times(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t out = 0;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &out)) return std::nullopt;
  return out;
}
inline std::optional<std::uint64_t> checked_plus(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t out = 0;
  if (!a || !b || __builtin_add_overflow(*a, *b, &out)) return std::nullopt;
  return out;
}

/// The sizes of a decoder, as the estimate reads them (validated >= 0 by the config).
struct DecoderSizes {
  std::uint64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim;
};

/// Bytes of float32 weights and the largest activations, counted 8 times (a few of each are
/// alive at once, and the trace's copies); nullopt where a product overflows.
inline std::optional<std::uint64_t> estimate_bytes(const DecoderSizes& s, std::int64_t batch, std::int64_t seq) {
  using U = std::optional<std::uint64_t>;
  const auto u = [](std::int64_t v) -> U { return static_cast<std::uint64_t>(v); };
  const U q = checked_times(s.heads, s.head_dim), kv = checked_times(s.kv_heads, s.head_dim);
  // Per layer: q and o (hidden x q), k and v (hidden x kv), gate, up, down, two norms.
  U layer = checked_plus(checked_times(2, checked_times(s.hidden, q)), checked_times(2, checked_times(s.hidden, kv)));
  layer = checked_plus(checked_plus(layer, checked_times(3, checked_times(s.hidden, s.intermediate))), checked_times(2, s.hidden));
  const U parameters = checked_plus(checked_plus(checked_times(s.vocab, s.hidden), checked_times(s.layers, layer)), s.hidden);
  // The largest activations of a layer: [B, S, intermediate], [B, heads, S, S] and [B, S, hidden].
  const U tokens = checked_times(u(batch), u(seq));
  U largest = checked_times(tokens, std::max(s.hidden, s.intermediate));
  const U scores = checked_times(checked_times(u(batch), s.heads), checked_times(u(seq), u(seq)));
  if (largest && scores) largest = std::max(*largest, *scores);
  if (!scores) largest = std::nullopt;
  return checked_times(4, checked_plus(parameters, checked_times(8, largest)));
}

/// Throws tracetorch::Error where the estimate overflows or exceeds the physical memory.
inline void check_fits_in_memory(const DecoderSizes& sizes, std::int64_t batch, std::int64_t seq) {
  const auto bytes = estimate_bytes(sizes, batch, seq);
  const std::string shape = " for input ids [" + std::to_string(batch) + ", " + std::to_string(seq) + "]";
  if (!bytes) throw Error("the config's sizes" + shape + " overflow when multiplied: refused");
  const auto pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t memory = pages > 0 && page_size > 0 ? std::uint64_t(pages) * std::uint64_t(page_size) : 0;
  if (memory != 0 && *bytes > memory) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    char text[160];
    std::snprintf(text, sizeof text, "needs about %.1f GiB (weights and activations)%s, more than this machine's %.1f GiB: refused",
                  double(*bytes) / kGiB, shape.c_str(), double(memory) / kGiB);
    throw Error(std::string("the config ") + text);
  }
}

/// The check for a config with the decoder keys; nothing for another config.
template <class Config>
void check_config_fits_in_memory(const Config& config, std::int64_t batch, std::int64_t seq) {
  if constexpr (decoder_config<Config>) {
    const auto u = [](auto v) { return static_cast<std::uint64_t>(v); };
    const std::uint64_t heads = u(config.num_attention_heads);
    std::uint64_t head_dim = heads == 0 ? 0 : u(config.hidden_size) / heads;
    if constexpr (requires { static_cast<std::uint64_t>(config.head_dim); }) head_dim = u(config.head_dim);
    check_fits_in_memory({u(config.vocab_size), u(config.hidden_size), u(config.intermediate_size), u(config.num_hidden_layers),
                          heads, u(config.num_key_value_heads), head_dim},
                         batch, seq);
  }
}

}  // namespace tracetorch::detail
