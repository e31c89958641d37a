#pragma once
/// \file
/// A CLIP-style vision encoder with transformers' module names, call conventions and numerics
/// (modeling_clip.py, 5.x: the flattened CLIPVisionModel, with embeddings, pre_layrnorm, encoder
/// and post_layernorm on the model itself), the vision tower of Llava-style models:
///
///   vision_tower(pixel_values, output_hidden_states=True, return_dict=True)   CLIPVisionModel
///     embeddings(pixel_values, interpolate_pos_encoding=False)               patch conv, class and
///       patch_embedding(pixel_values) ; position_embedding(position_ids)    position embeddings
///     pre_layrnorm(h)                                                        upstream's spelling
///     encoder(inputs_embeds=h, **kwargs)                                     the flags handed on
///       layers[i](h, None, **kwargs)                                         attention_mask positional
///         layer_norm1 ; self_attn(hidden_states=, attention_mask=None, **kwargs) -> (out, weights)
///           q_proj, k_proj, v_proj, out_proj
///         layer_norm2 ; mlp: fc1, activation_fn (ACT2FN[hidden_act], quick_gelu), fc2
///     post_layernorm(last_hidden_state[:, 0, :])                             pooler_output
///
/// hidden_states are captured as upstream's CLIPPreTrainedModel declares them (each encoder layer's
/// input, then each layer's output; the last not tied to last_hidden_state), attentions from each
/// CLIPAttention's output 1.
///
/// \code
/// tracetorch::models::CLIPVisionConfig config;                  // CLIPVisionConfig's defaults
/// config.image_size = 8; config.patch_size = 4; config.hidden_size = 16;
/// config.intermediate_size = 32; config.num_hidden_layers = 2; config.num_attention_heads = 2;
/// tracetorch::models::CLIPVisionModel tower(config);
/// auto out = tower(torch::randn({2, 3, 8, 8}), {}, {.output_hidden_states = true, .return_dict = true});
/// // out.last_hidden_state [2, 5, 16], out.pooler_output [2, 16], out.hidden_states: 3 tensors
/// \endcode

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/capture.hpp"
#include "tracetorch/config_file.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/keywords.hpp"
#include "tracetorch/kwargs.hpp"
#include "tracetorch/models/functional.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn.hpp"
#include "tracetorch/output.hpp"

namespace tracetorch::models {

/// transformers' CLIPVisionConfig keys and defaults (CLIP ViT-B/32), with the flags
/// PreTrainedConfig adds that capture reads.
struct CLIPVisionConfig {
  std::int64_t hidden_size = 768;
  std::int64_t intermediate_size = 3072;
  std::int64_t projection_dim = 512;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t num_channels = 3;
  std::int64_t image_size = 224;
  std::int64_t patch_size = 32;
  std::string hidden_act = "quick_gelu";
  double layer_norm_eps = 1e-5;
  double attention_dropout = 0.0;
  double initializer_range = 0.02;
  double initializer_factor = 1.0;
  bool output_hidden_states = false;
  bool output_attentions = false;

  /// Sizes that do not fit together (heads not dividing hidden_size, patches not tiling the
  /// image) or an unknown hidden_act: a tracetorch::Error naming `where` and the key.
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(CLIPVisionConfig, hidden_size, intermediate_size, projection_dim, num_hidden_layers, num_attention_heads,
                  num_channels, image_size, patch_size, hidden_act, layer_norm_eps, attention_dropout, initializer_range,
                  initializer_factor, output_hidden_states, output_attentions);

// After TRACETORCH_CONFIG: check_positive names each key from its list.
inline void CLIPVisionConfig::validate(const std::string& where) const {
  const std::string prefix = "CLIPVisionConfig: " + where;
  check_positive(*this, prefix, hidden_size, intermediate_size, num_attention_heads, num_channels, image_size, patch_size,
                 layer_norm_eps);
  check_not_negative(*this, prefix, num_hidden_layers);
  if (hidden_size % num_attention_heads != 0) throw Error(prefix + ": hidden_size is not a multiple of num_attention_heads");
  if (image_size % patch_size != 0) throw Error(prefix + ": image_size is not a multiple of patch_size");
  nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

/// transformers' BaseModelOutput (CLIPEncoder's) and BaseModelOutputWithPooling (CLIPVisionModel's).
struct BaseModelOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutput, last_hidden_state, hidden_states, attentions);

struct BaseModelOutputWithPooling {
  torch::Tensor last_hidden_state;
  torch::Tensor pooler_output;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPooling, last_hidden_state, pooler_output, hidden_states, attentions);

/// Patch embedding (a convolution of stride patch_size, no bias), the class embedding in front,
/// and a learned position embedding over position_ids = arange(patches + 1).
struct CLIPVisionEmbeddingsKeywords {
  Keyword<bool> interpolate_pos_encoding = defaults_to(false);
};
TRACETORCH_KEYWORDS(CLIPVisionEmbeddingsKeywords, interpolate_pos_encoding);

struct CLIPVisionEmbeddingsImpl : torch::nn::Module {
  explicit CLIPVisionEmbeddingsImpl(const CLIPVisionConfig& c)
      : image_size(c.image_size), num_patches((c.image_size / c.patch_size) * (c.image_size / c.patch_size)) {
    class_embedding = register_parameter("class_embedding", torch::randn({c.hidden_size}));
    patch_embedding = register_module(
        "patch_embedding",
        nn::Conv2d(torch::nn::Conv2dOptions(c.num_channels, c.hidden_size, c.patch_size).stride(c.patch_size).bias(false)));
    position_embedding = register_module("position_embedding", nn::Embedding(num_patches + 1, c.hidden_size));
    position_ids = torch::arange(num_patches + 1).expand({1, -1});  // upstream's non-persistent buffer
  }
  torch::Tensor forward(const torch::Tensor& pixel_values, const CLIPVisionEmbeddingsKeywords& kw = {});

  std::int64_t image_size, num_patches;
  torch::Tensor class_embedding, position_ids;
  nn::Conv2d patch_embedding{nullptr};
  nn::Embedding position_embedding{nullptr};
};
TRACETORCH_TRACEABLE(CLIPVisionEmbeddings);

/// CLIPAttention's keywords, as CLIPEncoderLayer passes them.
struct CLIPAttentionKeywords {
  Keyword<torch::Tensor> hidden_states;
  Keyword<torch::Tensor> attention_mask;
};
TRACETORCH_KEYWORDS(CLIPAttentionKeywords, hidden_states, attention_mask);

/// Multi-head self-attention with biased q/k/v/out projections (no causal mask), eager:
/// returns (attn_output, attn_weights).
struct CLIPAttentionImpl : torch::nn::Module {
  explicit CLIPAttentionImpl(const CLIPVisionConfig& c)
      : head_dim(c.hidden_size / c.num_attention_heads),
        scale(std::pow(static_cast<double>(c.hidden_size / c.num_attention_heads), -0.5)),
        dropout(c.attention_dropout) {
    // Registered in upstream's order (k, v, q, out): the state dict and named_modules keep it.
    k_proj = register_module("k_proj", nn::Linear(c.hidden_size, c.hidden_size));
    v_proj = register_module("v_proj", nn::Linear(c.hidden_size, c.hidden_size));
    q_proj = register_module("q_proj", nn::Linear(c.hidden_size, c.hidden_size));
    out_proj = register_module("out_proj", nn::Linear(c.hidden_size, c.hidden_size));
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const CLIPAttentionKeywords& kw, const Kwargs& kwargs = {});

  std::int64_t head_dim;
  double scale, dropout;
  nn::Linear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};
};
TRACETORCH_TRACEABLE(CLIPAttention);

/// fc1, activation_fn (ACT2FN[config.hidden_act]), fc2.
struct CLIPMLPImpl : torch::nn::Module {
  explicit CLIPMLPImpl(const CLIPVisionConfig& c) {
    activation_fn = nn::register_activation(*this, "activation_fn", c.hidden_act);
    fc1 = register_module("fc1", nn::Linear(c.hidden_size, c.intermediate_size));
    fc2 = register_module("fc2", nn::Linear(c.intermediate_size, c.hidden_size));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) { return fc2(activation_fn.forward(fc1(hidden_states))); }

  torch::nn::AnyModule activation_fn;
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
TRACETORCH_TRACEABLE(CLIPMLP);

/// Pre-norm block: h + self_attn(layer_norm1(h)), then + mlp(layer_norm2(.)). attention_mask is
/// positional, as CLIPEncoder passes it (None: an undefined tensor).
struct CLIPEncoderLayerImpl : torch::nn::Module {
  explicit CLIPEncoderLayerImpl(const CLIPVisionConfig& c) {
    const auto norm = torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps);
    self_attn = register_module("self_attn", CLIPAttention(c));
    layer_norm1 = register_module("layer_norm1", nn::LayerNorm(norm));
    mlp = register_module("mlp", CLIPMLP(c));
    layer_norm2 = register_module("layer_norm2", nn::LayerNorm(norm));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& attention_mask, const Kwargs& kwargs = {}) {
    auto h = hidden_states + std::get<0>(self_attn({.hidden_states = layer_norm1(hidden_states), .attention_mask = attention_mask}, kwargs));
    return h + mlp(layer_norm2(h));
  }

  CLIPAttention self_attn{nullptr};
  nn::LayerNorm layer_norm1{nullptr};
  CLIPMLP mlp{nullptr};
  nn::LayerNorm layer_norm2{nullptr};
};
TRACETORCH_TRACEABLE(CLIPEncoderLayer);

/// CLIPEncoder.forward's keywords: inputs_embeds, attention_mask=None.
struct CLIPEncoderInputs {
  Keyword<torch::Tensor> inputs_embeds, attention_mask;
};
TRACETORCH_KEYWORDS(CLIPEncoderInputs, inputs_embeds, attention_mask);

/// The layers in turn: encoder(inputs_embeds=h, **kwargs), each layer(h, attention_mask, **kwargs).
struct CLIPEncoderImpl : torch::nn::Module {
  explicit CLIPEncoderImpl(const CLIPVisionConfig& c) {
    layers = register_module("layers", nn::ModuleList());
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(CLIPEncoderLayer(c));
  }
  BaseModelOutput forward(const CLIPEncoderInputs& kw, const Kwargs& kwargs = {}) {
    auto hidden_states = *kw.inputs_embeds;
    for (const auto& layer : *layers) {  // through the holder type, so each call is traced
      hidden_states = layer->as<CLIPEncoderLayer>()->forward(hidden_states, *kw.attention_mask, kwargs);
    }
    return {.last_hidden_state = hidden_states};
  }

  nn::ModuleList layers{nullptr};
};
TRACETORCH_TRACEABLE(CLIPEncoder);

struct CLIPVisionModelInputs {
  Keyword<bool> interpolate_pos_encoding = defaults_to(false);
};
TRACETORCH_KEYWORDS(CLIPVisionModelInputs, interpolate_pos_encoding);

/// The vision model: embeddings, pre_layrnorm, encoder, post_layernorm of the class token.
/// forward(pixel_values, {}, options) as Python's vision_tower(pixel_values, **options); the
/// options' flags (not return_dict) are handed on to the encoder, its layers and their self_attn.
struct CLIPVisionModelImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      output_records(record<"hidden_states", CLIPEncoderLayer>(), record<"attentions", OutputRecorder<CLIPAttention, 1>>());

  explicit CLIPVisionModelImpl(const CLIPVisionConfig& c) : config(c) {
    config.validate("CLIPVisionModel");
    const auto norm = torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps);
    embeddings = register_module("embeddings", CLIPVisionEmbeddings(c));
    pre_layrnorm = register_module("pre_layrnorm", nn::LayerNorm(norm));
    encoder = register_module("encoder", CLIPEncoder(c));
    post_layernorm = register_module("post_layernorm", nn::LayerNorm(norm));
  }
  BaseModelOutputWithPooling forward(const torch::Tensor& pixel_values, const CLIPVisionModelInputs& kw = {},
                                     const OutputOptions& options = {});

  CLIPVisionConfig config;
  CLIPVisionEmbeddings embeddings{nullptr};
  nn::LayerNorm pre_layrnorm{nullptr};
  CLIPEncoder encoder{nullptr};
  nn::LayerNorm post_layernorm{nullptr};
};
TRACETORCH_TRACEABLE(CLIPVisionModel);

inline torch::Tensor CLIPVisionEmbeddingsImpl::forward(const torch::Tensor& pixel_values, const CLIPVisionEmbeddingsKeywords& kw) {
  if (*kw.interpolate_pos_encoding) throw Error("CLIPVisionEmbeddings: interpolate_pos_encoding=True is not ported");
  if (pixel_values.dim() != 4 || pixel_values.size(2) != image_size || pixel_values.size(3) != image_size) {
    std::ostringstream why;
    why << "CLIPVisionEmbeddings: Input image size " << pixel_values.sizes() << " doesn't match model (" << image_size << "*"
        << image_size << ")";
    throw Error(why.str());
  }
  const auto batch = pixel_values.size(0);
  auto patch_embeds = patch_embedding(pixel_values.to(patch_embedding->weight.scalar_type())).flatten(2).transpose(1, 2);
  auto embeddings = torch::cat({class_embedding.expand({batch, 1, -1}), patch_embeds}, 1);
  return embeddings + position_embedding(position_ids.to(pixel_values.device()));
}

inline std::tuple<torch::Tensor, torch::Tensor> CLIPAttentionImpl::forward(const CLIPAttentionKeywords& kw, const Kwargs&) {
  const auto& hidden_states = *kw.hidden_states;
  auto shape = hidden_states.sizes().vec();  // (*input_shape, -1, head_dim)
  shape.back() = -1;
  shape.push_back(head_dim);
  const auto queries = q_proj(hidden_states).view(shape).transpose(1, 2);
  const auto keys = k_proj(hidden_states).view(shape).transpose(1, 2);
  const auto values = v_proj(hidden_states).view(shape).transpose(1, 2);
  auto [output, weights] = eager_attention_forward(queries, keys, values, *kw.attention_mask, scale,
                                                   is_training() ? dropout : 0.0, is_training());
  shape.pop_back();
  return {out_proj(output.reshape(shape).contiguous()), weights};
}

inline BaseModelOutputWithPooling CLIPVisionModelImpl::forward(const torch::Tensor& pixel_values, const CLIPVisionModelInputs& kw,
                                                               const OutputOptions& options) {
  const auto body = [&] {
    auto hidden_states = embeddings(pixel_values, {.interpolate_pos_encoding = kw.interpolate_pos_encoding.or_none()});
    hidden_states = pre_layrnorm(hidden_states);
    const auto last_hidden_state = encoder({.inputs_embeds = hidden_states}, options_as_kwargs(options, /*with_use_cache=*/true)).last_hidden_state;
    const auto pooled = post_layernorm(last_hidden_state.select(1, 0));
    return BaseModelOutputWithPooling{.last_hidden_state = last_hidden_state, .pooler_output = pooled};
  };
  return capture_outputs(*this, options, body, CaptureSettings{.tie_last_hidden_states = false});
}

}  // namespace tracetorch::models
