#pragma once
/// \file
/// What the shared decoder parts read from a family's config struct. The sizes every family has
/// are read directly (config.hidden_size, ...); the fields only some families have are read here,
/// each with upstream's meaning when the struct lacks it (no head_dim: hidden_size / heads; no
/// attention_bias: false; no sliding window: full attention). Qwen2's era names some differently:
/// `qkv_bias` (the q/k/v projections' bias, o_proj none) and `rope_parameters` (rope_type and
/// rope_theta in one object), read here where the struct has them.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace tracetorch::detail {

/// transformers' rope_scaling / rope_parameters for the types ported: "default" and "llama3".
struct RopeScaling {
  std::string rope_type = "default";
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;
};

/// A config field that may be declared plain or as std::optional, as an optional of `R`.
template <class R, class T>
std::optional<R> optional_of(const T& value) {
  if constexpr (requires { value.has_value(); }) {
    return value ? std::optional<R>(R(*value)) : std::nullopt;
  } else {
    return R(value);
  }
}

template <class Config>
std::int64_t head_dim_of(const Config& c) {
  if constexpr (requires { c.head_dim; }) {
    if (auto dim = optional_of<std::int64_t>(c.head_dim)) return *dim;
  }
  return c.hidden_size / c.num_attention_heads;
}

/// `config.field` where the config struct has that field, else `fallback` (evaluated only then):
/// the one rule of the optional fields below.
#define TRACETORCH_DETAIL_FIELD_OR(config, field, fallback) \
  [&] {                                                     \
    if constexpr (requires { config.field; }) {             \
      return config.field;                                  \
    } else {                                                \
      return fallback;                                      \
    }                                                       \
  }()

template <class Config>
bool attention_bias_of(const Config& c) { return TRACETORCH_DETAIL_FIELD_OR(c, attention_bias, false); }
/// The q/k/v projections' bias: `qkv_bias` where the config has it (Qwen2, Qwen2-MoE: o_proj
/// then has none unless attention_bias says so), else attention_bias.
template <class Config>
bool qkv_bias_of(const Config& c) { return TRACETORCH_DETAIL_FIELD_OR(c, qkv_bias, attention_bias_of(c)); }
template <class Config>
bool mlp_bias_of(const Config& c) { return TRACETORCH_DETAIL_FIELD_OR(c, mlp_bias, false); }
template <class Config>
double attention_dropout_of(const Config& c) { return TRACETORCH_DETAIL_FIELD_OR(c, attention_dropout, 0.0); }

template <class Config>
std::optional<std::int64_t> pad_token_id_of(const Config& c) {
  if constexpr (requires { c.pad_token_id; }) return optional_of<std::int64_t>(c.pad_token_id);
  return std::nullopt;
}

/// rope_theta: `rope_parameters.rope_theta` where the config nests it (transformers 5.x), else
/// the config's own rope_theta.
template <class Config>
double rope_theta_of(const Config& c) {
  return static_cast<double>(TRACETORCH_DETAIL_FIELD_OR(c, rope_parameters.rope_theta, c.rope_theta));
}

/// rope_scaling, or `rope_parameters` read as one (its rope_type and, where it has them, the
/// llama3 keys).
template <class Config>
std::optional<RopeScaling> rope_scaling_of(const Config& c) {
  if constexpr (requires { c.rope_scaling; }) {
    return c.rope_scaling;
  } else if constexpr (requires { c.rope_parameters.rope_type; }) {
    RopeScaling scaling;
    const auto& p = c.rope_parameters;
    scaling.rope_type = p.rope_type;
    if constexpr (requires { p.factor; }) scaling.factor = p.factor;
    if constexpr (requires { p.low_freq_factor; }) scaling.low_freq_factor = p.low_freq_factor;
    if constexpr (requires { p.high_freq_factor; }) scaling.high_freq_factor = p.high_freq_factor;
    if constexpr (requires { p.original_max_position_embeddings; }) {
      scaling.original_max_position_embeddings = p.original_max_position_embeddings;
    }
    return scaling;
  } else {
    return std::nullopt;
  }
}

/// The attention's scaling: query_pre_attn_scalar ** -0.5 where the config has it (Gemma2), else
/// head_dim ** -0.5.
template <class Config>
double attention_scaling_of(const Config& c) {
  if constexpr (requires { c.query_pre_attn_scalar; }) {
    return std::pow(static_cast<double>(c.query_pre_attn_scalar), -0.5);
  } else {
    return std::pow(static_cast<double>(head_dim_of(c)), -0.5);
  }
}

/// The attention logits' soft cap, tanh(x / cap) * cap before the mask, where the config has
/// attn_logit_softcapping and sets it (Gemma2); none otherwise.
template <class Config>
std::optional<double> attn_logit_softcapping_of(const Config& c) {
  if constexpr (requires { c.attn_logit_softcapping; }) return optional_of<double>(c.attn_logit_softcapping);
  return std::nullopt;
}

/// ACT2FN's key for the MLP: hidden_activation where the config has it and sets it (Gemma's and
/// Gemma2's MLP read that key), else hidden_act.
template <class Config>
std::string hidden_activation_of(const Config& c) {
  static_assert(requires { c.hidden_activation; } || requires { c.hidden_act; },
                "an MLP of ACT2FN[...] needs the config's hidden_act or hidden_activation");
  std::optional<std::string> name;
  if constexpr (requires { c.hidden_activation; }) name = optional_of<std::string>(c.hidden_activation);
  if constexpr (requires { c.hidden_act; }) {
    if (!name) name = c.hidden_act;
  }
  return name.value_or("");  // neither set: get_activation refuses "", listing the known names
}

/// The window of layer `layer_idx`, or nullopt for full attention: from `layer_types` when the
/// config has them ("sliding_attention"), else the config's sliding_window for every layer
/// (Mistral's).
template <class Config>
std::optional<std::int64_t> sliding_window_of(const Config& c, std::int64_t layer_idx) {
  std::optional<std::int64_t> window;
  if constexpr (requires { c.sliding_window; }) window = optional_of<std::int64_t>(c.sliding_window);
  if constexpr (requires { c.layer_types; }) {
    if (!c.layer_types.empty()) {
      const bool sliding = layer_idx >= 0 && static_cast<std::size_t>(layer_idx) < c.layer_types.size() &&
                           c.layer_types[static_cast<std::size_t>(layer_idx)] == "sliding_attention";
      return sliding ? window : std::nullopt;
    }
  }
  return window;
}

}  // namespace tracetorch::detail
