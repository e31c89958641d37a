#pragma once
/// \file
/// transformers' eager attention (eager_attention_forward with repeat_kv) and the rotary
/// embedding's kernels (the default and Llama 3's inverse frequencies, rotate_half,
/// apply_rotary_pos_emb), operation for operation as upstream computes them: a trace prints four
/// significant digits, so the order of operations shows.

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// [batch, kv_heads, seq, head_dim] -> [batch, kv_heads * n_rep, seq, head_dim], each head
/// repeated n_rep times in place (upstream's expand and reshape).
inline torch::Tensor repeat_kv(const torch::Tensor& states, std::int64_t n_rep) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  if (n_rep == 1) return states;
  const auto batch = states.size(0), kv_heads = states.size(1), length = states.size(2), head_dim = states.size(3);
  return states.index({Slice(), Slice(), None, Slice(), Slice()})
      .expand({batch, kv_heads, n_rep, length, head_dim})
      .reshape({batch, kv_heads * n_rep, length, head_dim});
}

/// (attn_output [batch, q, heads, head_dim], attn_weights [batch, heads, q, kv]).
inline std::tuple<torch::Tensor, torch::Tensor> eager_attention_forward(const torch::Tensor& query, const torch::Tensor& key,
                                                                        const torch::Tensor& value,
                                                                        const torch::Tensor& attention_mask, double scaling,
                                                                        double dropout, bool training,
                                                                        std::optional<double> softcap = std::nullopt) {
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4 || key.size(1) == 0 || query.size(1) % key.size(1) != 0) {
    throw Error("eager_attention_forward: query, key and value must be [batch, heads, seq, head_dim] with the query's heads a "
                "multiple of the key's");
  }
  const auto groups = query.size(1) / key.size(1);
  const auto key_states = repeat_kv(key, groups);
  const auto value_states = repeat_kv(value, groups);
  auto weights = torch::matmul(query, key_states.transpose(2, 3)) * scaling;
  if (softcap) weights = torch::tanh(weights / *softcap) * *softcap;  // Gemma2's, three steps as upstream's
  if (attention_mask.defined()) weights = weights + attention_mask.slice(3, 0, key_states.size(-2));
  weights = torch::softmax(weights, -1, torch::kFloat32).to(query.scalar_type());
  if (training && dropout > 0) weights = torch::dropout(weights, dropout, true);  // the identity otherwise
  auto output = torch::matmul(weights, value_states).transpose(1, 2).contiguous();
  return {output, weights};
}

/// x with its last dimension's halves swapped and the second negated: cat(-x2, x1).
inline torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

/// (q * cos + rotate_half(q) * sin, the same for k), cos and sin unsqueezed at `unsqueeze_dim`.
inline std::pair<torch::Tensor, torch::Tensor> apply_rotary_pos_emb(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const torch::Tensor& cos, const torch::Tensor& sin,
                                                                    std::int64_t unsqueeze_dim) {
  const auto c = cos.unsqueeze(unsqueeze_dim);
  const auto s = sin.unsqueeze(unsqueeze_dim);
  return {q * c + rotate_half(q) * s, k * c + rotate_half(k) * s};
}

/// The default inverse frequencies: 1 / theta^(arange(0, dim, 2) / dim), float32.
inline torch::Tensor default_inv_freq(double theta, std::int64_t dim) {
  const auto exponent = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(dim);
  return 1.0 / torch::pow(theta, exponent);
}

/// Llama 3's scaling of the default frequencies: long wavelengths divided by `factor`, short ones
/// kept, the band between interpolated smoothly.
inline torch::Tensor llama3_inv_freq(const torch::Tensor& inv_freq, double factor, double low_freq_factor,
                                     double high_freq_factor, double original_max_position_embeddings) {
  if (!(factor > 0) || !(high_freq_factor != low_freq_factor) || !(original_max_position_embeddings > 0)) {
    throw Error("rotary embedding: llama3 needs factor > 0, high_freq_factor != low_freq_factor and "
                "original_max_position_embeddings > 0");
  }
  const double low_freq_wavelen = original_max_position_embeddings / low_freq_factor;
  const double high_freq_wavelen = original_max_position_embeddings / high_freq_factor;
  // Python's `scalar / tensor` is tensor.reciprocal() * scalar (torch/_tensor.py), not a division:
  // written the same way, so the rounding is the same.
  const auto wavelen = inv_freq.reciprocal() * (2 * M_PI);
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
  const auto smooth = (wavelen.reciprocal() * original_max_position_embeddings - low_freq_factor) / (high_freq_factor - low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  const auto medium = (wavelen < high_freq_wavelen).logical_not() * (wavelen > low_freq_wavelen).logical_not();
  return torch::where(medium, smoothed, scaled);
}

/// (cos, sin) [batch, seq, dim] of positions [batch, seq], computed in float32 and cast to x's
/// dtype; each scaled by attention_scaling (1 for the default and llama3 types).
inline std::tuple<torch::Tensor, torch::Tensor> rotary_cos_sin(const torch::Tensor& inv_freq, double attention_scaling,
                                                               const torch::Tensor& x, const torch::Tensor& position_ids) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  torch::NoGradGuard no_grad;  // upstream's @torch.no_grad()
  if (position_ids.dim() != 2) throw Error("rotary embedding: position_ids must be [batch, seq]");
  const auto inv = inv_freq.index({None, Slice(), None}).to(torch::kFloat32).expand({position_ids.size(0), -1, 1}).to(x.device());
  const auto positions = position_ids.index({Slice(), None, Slice()}).to(torch::kFloat32);
  const auto freqs = torch::matmul(inv, positions).transpose(1, 2);
  const auto emb = torch::cat({freqs, freqs}, -1);
  auto cos = emb.cos(), sin = emb.sin();
  if (attention_scaling != 1.0) {  // x * 1.0 is x: skipped, as it changes nothing
    cos = cos * attention_scaling;
    sin = sin * attention_scaling;
  }
  return {cos.to(x.scalar_type()), sin.to(x.scalar_type())};
}

}  // namespace tracetorch::detail
