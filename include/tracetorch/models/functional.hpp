#pragma once
/// \file
/// The functions transformers' decoder models share, with upstream's names, arguments and
/// numerics (each is the same sequence of tensor operations, so traces print the same digits):
/// the eager causal mask, eager attention with grouped-query heads, and the rotary embedding's
/// kernels. The modules built on them are in models/layers.hpp and models/decoder.hpp.
///
/// \code
/// // Two sequences of 4, the second left-padded by one; a window of 3.
/// const auto ids_mask = torch::tensor({{1, 1, 1, 1}, {0, 1, 1, 1}});
/// const auto mask = tracetorch::models::create_causal_mask(torch::arange(4), 2, 4, 0, ids_mask, 3, torch::kFloat32);
/// // mask: [2, 1, 4, 4] of 0 and -3.4028e+38
/// \endcode

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

#include "tracetorch/config_struct.hpp"
#include "tracetorch/detail/models/attention.hpp"
#include "tracetorch/detail/models/config_fields.hpp"
#include "tracetorch/detail/models/mask.hpp"

namespace tracetorch::models {

/// (cos, sin), each [batch, seq, head_dim]: what a rotary embedding returns and attention takes.
using PositionEmbeddings = std::tuple<torch::Tensor, torch::Tensor>;

/// transformers' rope_scaling (`rope_parameters`) for the types ported: "default" and "llama3"
/// (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
using RopeScaling = detail::RopeScaling;

}  // namespace tracetorch::models

namespace tracetorch::detail {
// A config field a port declares with TRACETORCH_CONFIG reads it as a nested object (an older
// config's "type" is the port's to map onto rope_type).
TRACETORCH_CONFIG(RopeScaling, rope_type, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings);
}  // namespace tracetorch::detail

namespace tracetorch::models {

/// masking_utils.create_causal_mask (with a window: create_sliding_window_causal_mask) for eager
/// attention: [batch, 1, q, kv_length] of 0 where query i (at cache_position[i]) may attend key j
/// (at kv_offset + j) and torch.finfo(dtype).min elsewhere. A key is allowed when it is not after
/// the query, within `sliding_window` of it when one is given (key > query - window), and not
/// padding in `attention_mask` ([batch, >= kv_offset + kv_length] of 1/0 or bool; keys past its
/// end are padding). A 4-d attention_mask is returned unchanged, as upstream does.
inline torch::Tensor create_causal_mask(const torch::Tensor& cache_position, std::int64_t batch, std::int64_t kv_length,
                                        std::int64_t kv_offset, const torch::Tensor& attention_mask,
                                        std::optional<std::int64_t> sliding_window, const torch::TensorOptions& options) {
  return detail::create_causal_mask(cache_position, batch, kv_length, kv_offset, attention_mask, sliding_window, options);
}

/// repeat_kv: [batch, kv_heads, seq, dim] -> [batch, kv_heads * n_rep, seq, dim].
inline torch::Tensor repeat_kv(const torch::Tensor& states, std::int64_t n_rep) { return detail::repeat_kv(states, n_rep); }

/// eager_attention_forward: the key and value heads repeated to the query's (GQA), weights =
/// query @ key^T * scaling, soft-capped where `softcap` is given (Gemma2's: tanh(w / cap) * cap),
/// + mask (sliced to the key length), softmax in float32 then cast to the query's dtype, dropout
/// only in training. Returns (attn_output [batch, q, heads, dim], attn_weights [batch, heads, q, kv]).
inline std::tuple<torch::Tensor, torch::Tensor> eager_attention_forward(const torch::Tensor& query, const torch::Tensor& key,
                                                                        const torch::Tensor& value,
                                                                        const torch::Tensor& attention_mask, double scaling,
                                                                        double dropout = 0.0, bool training = false,
                                                                        std::optional<double> softcap = std::nullopt) {
  return detail::eager_attention_forward(query, key, value, attention_mask, scaling, dropout, training, softcap);
}

/// rotate_half and apply_rotary_pos_emb (cos and sin unsqueezed at `unsqueeze_dim`, the heads').
inline torch::Tensor rotate_half(const torch::Tensor& x) { return detail::rotate_half(x); }
inline std::pair<torch::Tensor, torch::Tensor> apply_rotary_pos_emb(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const torch::Tensor& cos, const torch::Tensor& sin,
                                                                    std::int64_t unsqueeze_dim = 1) {
  return detail::apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim);
}

/// The rope types' inverse frequencies (modeling_rope_utils): (inv_freq [dim / 2] float32,
/// attention_scaling). "default": 1 / theta^(arange(0, dim, 2) / dim); "llama3": those scaled
/// by `scaling`'s factors. Another type is a tracetorch::Error naming it.
inline std::pair<torch::Tensor, double> rope_inv_freq(double rope_theta, std::int64_t dim,
                                                      const std::optional<RopeScaling>& scaling = std::nullopt) {
  auto inv_freq = detail::default_inv_freq(rope_theta, dim);
  if (!scaling || scaling->rope_type == "default") return {inv_freq, 1.0};
  if (scaling->rope_type == "llama3") {
    return {detail::llama3_inv_freq(inv_freq, scaling->factor, scaling->low_freq_factor, scaling->high_freq_factor,
                                    scaling->original_max_position_embeddings),
            1.0};
  }
  throw Error("rotary embedding: rope_type \"" + scaling->rope_type + "\" is not ported (\"default\" and \"llama3\" are)");
}

/// The rotary embedding's forward: (cos, sin) of positions [batch, seq] in float32, times
/// attention_scaling, cast to x's dtype.
inline PositionEmbeddings rotary_cos_sin(const torch::Tensor& inv_freq, double attention_scaling, const torch::Tensor& x,
                                         const torch::Tensor& position_ids) {
  return detail::rotary_cos_sin(inv_freq, attention_scaling, x, position_ids);
}

}  // namespace tracetorch::models
