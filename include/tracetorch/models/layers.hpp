#pragma once
/// \file
/// The layers transformers' decoder families share, as class templates over a family (a struct
/// naming the family and its few differences, models/decoder.hpp's DecoderFamily): RMSNorm,
/// the rotary embedding and the gated MLP. `RMSNorm<Qwen3>` is the traced holder registered as
/// "Qwen3RMSNorm": the family's `name` followed by the part's, so a trace shows each family's
/// own class names with no TRACEABLE line per class.
///
/// \code
/// struct Tiny : tracetorch::models::DecoderFamily<TinyConfig> {
///   static constexpr std::string_view name = "Tiny";
/// };
/// tracetorch::models::RMSNorm<Tiny> norm(8, 1e-6);   // traced as "TinyRMSNorm"
/// static_assert(tracetorch::is_traceable_v<tracetorch::models::RMSNorm<Tiny>>);
/// \endcode

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "tracetorch/keywords.hpp"
#include "tracetorch/models/functional.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn/activations.hpp"  // get_activation (ACT2FN)
#include "tracetorch/nn/layers.hpp"       // Linear, Embedding (not nn.hpp: a model file needs no Conv1D, state_dict)
#include "tracetorch/detail/models/family_names.hpp"

namespace tracetorch::models {

/// How an RMSNorm applies its weight: `weight * normed.to(dtype)` (Llama, Qwen, Mistral; the
/// weight starts at ones) or `(normed * (1 + weight)).to(dtype)` (Gemma; it starts at zeros).
/// Both normalise in float32.
enum class RMSNormKind { weight, one_plus_weight };

/// The traced holder of a shared part in family `Family`, registered as Family::name + Suffix.
#ifdef TRACETORCH_DISABLE
template <class Impl, class Family, detail::FixedString Suffix>
using FamilyHolder = detail::PlainHolder<Impl>;
#else
template <class Impl, class Family, detail::FixedString Suffix>
using FamilyHolder = detail::TracedHolder<Impl, detail::family_class_name<Family, Suffix>()>;
#endif

/// RMSNorm over the last dimension, `Family::rms_norm` choosing how the weight applies.
template <class Family>
struct RMSNormImpl : torch::nn::Module {
  explicit RMSNormImpl(std::int64_t hidden_size, double eps = 1e-6) : variance_epsilon(eps) {
    const bool plus_one = Family::rms_norm == RMSNormKind::one_plus_weight;
    weight = register_parameter("weight", plus_one ? torch::zeros({hidden_size}) : torch::ones({hidden_size}));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states);

  torch::Tensor weight;
  double variance_epsilon;
};
template <class Family>
using RMSNorm = FamilyHolder<RMSNormImpl<Family>, Family, "RMSNorm">;

/// rotary_emb's position_ids passed by keyword, as `rotary_emb(x, position_ids=ids)` (Llama from
/// transformers 5.x) where a family sets `rotary_position_ids_keyword`.
struct RotaryKeywords {
  Keyword<torch::Tensor> position_ids;
};
TRACETORCH_KEYWORDS(RotaryKeywords, position_ids);

/// Whether `Family` passes rotary_emb's position_ids by keyword (false unless it says so).
template <class Family>
inline constexpr bool rotary_position_ids_keyword = [] {
  if constexpr (requires { Family::rotary_position_ids_keyword; }) {
    return static_cast<bool>(Family::rotary_position_ids_keyword);
  } else {
    return false;
  }
}();

/// The rotary embedding's second parameter: a tensor (positional) or RotaryKeywords.
template <class Family>
using RotaryPositionIds = std::conditional_t<rotary_position_ids_keyword<Family>, RotaryKeywords, torch::Tensor>;

/// The rotary embedding: inv_freq from the config's rope_theta, head dimension and rope_scaling
/// ("default" or "llama3"; or a nested `rope_parameters` holding rope_type and rope_theta); forward(x, position_ids) -> (cos, sin) in x's dtype. inv_freq is
/// kept out of the state dict, as upstream's non-persistent buffer is.
template <class Family>
struct RotaryEmbeddingImpl : torch::nn::Module {
  explicit RotaryEmbeddingImpl(const typename Family::Config& config) {
    const auto scaling = detail::rope_scaling_of(config);
    rope_type = scaling ? scaling->rope_type : "default";
    std::tie(inv_freq, attention_scaling) = rope_inv_freq(detail::rope_theta_of(config), detail::head_dim_of(config), scaling);
  }
  PositionEmbeddings forward(const torch::Tensor& x, const RotaryPositionIds<Family>& position_ids) {
    if constexpr (rotary_position_ids_keyword<Family>) {
      return rotary_cos_sin(inv_freq, attention_scaling, x, *position_ids.position_ids);
    } else {
      return rotary_cos_sin(inv_freq, attention_scaling, x, position_ids);
    }
  }

  torch::Tensor inv_freq;
  double attention_scaling = 1.0;
  std::string rope_type;
};
template <class Family>
using RotaryEmbedding = FamilyHolder<RotaryEmbeddingImpl<Family>, Family, "RotaryEmbedding">;

/// The gated MLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), called in that order; gate and
/// up are the family's column-parallel linears, down its row-parallel one (plain nn::Linear
/// unless the family is tensor-parallel). act_fn is
/// a `Family::Activation` (tracetorch::nn::SiLU by default); a `torch::nn::AnyModule` there means
/// `ACT2FN[config.hidden_act]` (tracetorch::nn::get_activation). `intermediate_size`, when given,
/// replaces the config's (Qwen2-MoE's `Qwen2MoeMLP(config, intermediate_size=...)`: the shared
/// expert's width).
template <class Family>
struct GatedMLPImpl : torch::nn::Module {
  using Activation = typename Family::Activation;
  explicit GatedMLPImpl(const typename Family::Config& c, std::optional<std::int64_t> intermediate_size = std::nullopt) {
    using torch::nn::LinearOptions;
    const bool bias = detail::mlp_bias_of(c);
    const std::int64_t width = intermediate_size.value_or(c.intermediate_size);
    gate_proj = register_module("gate_proj", Family::colwise_linear(c, LinearOptions(c.hidden_size, width).bias(bias)));
    up_proj = register_module("up_proj", Family::colwise_linear(c, LinearOptions(c.hidden_size, width).bias(bias)));
    down_proj = register_module("down_proj", Family::rowwise_linear(c, LinearOptions(width, c.hidden_size).bias(bias)));
    if constexpr (std::is_same_v<Activation, torch::nn::AnyModule>) {
      act_fn = nn::get_activation(detail::hidden_activation_of(c));
      register_module("act_fn", act_fn.ptr());
    } else {
      act_fn = register_module("act_fn", Activation());
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    // gate before up, as Python evaluates the expression: the trace lists the calls in that order.
    torch::Tensor gate;
    if constexpr (std::is_same_v<Activation, torch::nn::AnyModule>) {
      gate = act_fn.forward(gate_proj(x));
    } else {
      gate = act_fn(gate_proj(x));
    }
    return down_proj(gate * up_proj(x));
  }

  typename Family::ColwiseLinear gate_proj{nullptr}, up_proj{nullptr};
  typename Family::RowwiseLinear down_proj{nullptr};
  Activation act_fn = [] {  // empty until the constructor makes it, as a holder{nullptr}
    if constexpr (std::is_same_v<Activation, torch::nn::AnyModule>) {
      return Activation();
    } else {
      return Activation(nullptr);
    }
  }();
};
template <class Family>
using GatedMLP = FamilyHolder<GatedMLPImpl<Family>, Family, "MLP">;

template <class Family>
torch::Tensor RMSNormImpl<Family>::forward(const torch::Tensor& hidden_states) {
  const auto widened = hidden_states.to(torch::kFloat32);
  const auto normed = widened * torch::rsqrt(widened.pow(2).mean(-1, /*keepdim=*/true) + variance_epsilon);
  if constexpr (Family::rms_norm == RMSNormKind::one_plus_weight) {
    return (normed * (1.0 + weight.to(torch::kFloat32))).to(hidden_states.scalar_type());
  } else {
    return weight * normed.to(hidden_states.scalar_type());
  }
}

// Registration markers, as TRACEABLE declares them: from a family part's Impl type to its holder
// (tracetorch::is_traceable_v<RMSNormImpl<F>>, capture's record maps).
#ifndef TRACETORCH_DISABLE
#define TRACETORCH_DETAIL_FAMILY_PART_MARKER(Part) \
  template <class F>                               \
  detail::traceable_tag<Part<F>> tracetorch_traceable_marker(Part##Impl<F>*);
#else
#define TRACETORCH_DETAIL_FAMILY_PART_MARKER(Part)
#endif
TRACETORCH_DETAIL_FAMILY_PART_MARKER(RMSNorm)
TRACETORCH_DETAIL_FAMILY_PART_MARKER(RotaryEmbedding)
TRACETORCH_DETAIL_FAMILY_PART_MARKER(GatedMLP)

}  // namespace tracetorch::models
