#pragma once
// A small ViT-style image encoder in transformers' ViTModel module names
// (embeddings.{patch_embeddings.projection}, encoder.layer.N.{layernorm_before,
// attention.{attention.{query, key, value}, output.dense}, layernorm_after, intermediate.dense,
// intermediate.intermediate_act_fn, output.dense}, layernorm): pixel_values in, no input_ids.

#include <tracetorch/capture.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace vision {

struct ViTConfig {
  std::int64_t image_size = 16;
  std::int64_t patch_size = 4;
  std::int64_t num_channels = 3;
  std::int64_t hidden_size = 32;
  std::int64_t num_hidden_layers = 2;
  std::int64_t num_attention_heads = 4;
  std::int64_t intermediate_size = 37;
  double layer_norm_eps = 1e-12;
  bool output_hidden_states = false;
  bool output_attentions = false;

  std::int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

/// Cuts the image into patch_size x patch_size patches and projects each to hidden_size (one
/// strided convolution): [batch, channels, H, W] -> [batch, patches, hidden].
struct ViTPatchEmbeddingsImpl : torch::nn::Module {
  explicit ViTPatchEmbeddingsImpl(const ViTConfig& config) : config(config) {
    projection = register_module(
        "projection", tracetorch::nn::Conv2d(torch::nn::Conv2dOptions(config.num_channels, config.hidden_size, config.patch_size)
                                                 .stride(config.patch_size)));
  }
  torch::Tensor forward(const torch::Tensor& pixel_values) {
    if (pixel_values.dim() != 4 || pixel_values.size(1) != config.num_channels ||
        pixel_values.size(2) != config.image_size || pixel_values.size(3) != config.image_size) {
      std::ostringstream why;
      why << "vision: pixel_values must be [batch, " << config.num_channels << ", " << config.image_size << ", "
          << config.image_size << "], got " << pixel_values.sizes();
      throw tracetorch::Error(why.str());
    }
    return projection(pixel_values).flatten(2).transpose(1, 2);
  }
  ViTConfig config;
  tracetorch::nn::Conv2d projection{nullptr};
};
TRACEABLE(ViTPatchEmbeddings);

/// [CLS] token, then the patches, plus learned position embeddings.
struct ViTEmbeddingsImpl : torch::nn::Module {
  explicit ViTEmbeddingsImpl(const ViTConfig& config) {
    cls_token = register_parameter("cls_token", torch::randn({1, 1, config.hidden_size}) * 0.02);
    position_embeddings =
        register_parameter("position_embeddings", torch::randn({1, config.num_patches() + 1, config.hidden_size}) * 0.02);
    patch_embeddings = register_module("patch_embeddings", ViTPatchEmbeddings(config));
  }
  torch::Tensor forward(const torch::Tensor& pixel_values) {
    const auto patches = patch_embeddings(pixel_values);
    const auto cls = cls_token.expand({patches.size(0), -1, -1});
    return torch::cat({cls, patches}, 1) + position_embeddings;
  }
  torch::Tensor cls_token, position_embeddings;
  ViTPatchEmbeddings patch_embeddings{nullptr};
};
TRACEABLE(ViTEmbeddings);

/// Multi-head self-attention; returns (context, attention probabilities [batch, heads, seq, seq]).
struct ViTSelfAttentionImpl : torch::nn::Module {
  explicit ViTSelfAttentionImpl(const ViTConfig& config)
      : num_heads(config.num_attention_heads), head_dim(config.hidden_size / config.num_attention_heads) {
    query = register_module("query", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
    key = register_module("key", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
    value = register_module("value", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states) {
    const auto split = [&](const torch::Tensor& x) {
      return x.view({x.size(0), x.size(1), num_heads, head_dim}).transpose(1, 2);
    };
    const auto q = split(query(hidden_states));
    const auto k = split(key(hidden_states));
    const auto v = split(value(hidden_states));
    const auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(head_dim)), -1);
    auto context = torch::matmul(probs, v).transpose(1, 2).reshape({hidden_states.size(0), hidden_states.size(1), -1});
    return {context, probs};
  }
  std::int64_t num_heads, head_dim;
  tracetorch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
};
TRACEABLE(ViTSelfAttention);

/// The attention's output projection (the residual is added by the layer, as in ViT).
struct ViTSelfOutputImpl : torch::nn::Module {
  explicit ViTSelfOutputImpl(const ViTConfig& config) {
    dense = register_module("dense", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) { return dense(hidden_states); }
  tracetorch::nn::Linear dense{nullptr};
};
TRACEABLE(ViTSelfOutput);

struct ViTAttentionImpl : torch::nn::Module {
  explicit ViTAttentionImpl(const ViTConfig& config) {
    attention = register_module("attention", ViTSelfAttention(config));
    output = register_module("output", ViTSelfOutput(config));
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states) {
    auto [context, probs] = attention(hidden_states);
    return {output(context), probs};
  }
  ViTSelfAttention attention{nullptr};
  ViTSelfOutput output{nullptr};
};
TRACEABLE(ViTAttention);

struct ViTIntermediateImpl : torch::nn::Module {
  explicit ViTIntermediateImpl(const ViTConfig& config) {
    dense = register_module("dense", tracetorch::nn::Linear(config.hidden_size, config.intermediate_size));
    intermediate_act_fn = register_module("intermediate_act_fn", tracetorch::nn::GELU());
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) { return intermediate_act_fn(dense(hidden_states)); }
  tracetorch::nn::Linear dense{nullptr};
  tracetorch::nn::GELU intermediate_act_fn{nullptr};
};
TRACEABLE(ViTIntermediate);

struct ViTOutputImpl : torch::nn::Module {
  explicit ViTOutputImpl(const ViTConfig& config) {
    dense = register_module("dense", tracetorch::nn::Linear(config.intermediate_size, config.hidden_size));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& residual) {
    return dense(hidden_states) + residual;
  }
  tracetorch::nn::Linear dense{nullptr};
};
TRACEABLE(ViTOutput);

/// Pre-norm transformer block: layernorm_before -> attention -> residual, layernorm_after -> MLP -> residual.
struct ViTLayerImpl : torch::nn::Module {
  explicit ViTLayerImpl(const ViTConfig& config) {
    const auto norm = torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps);
    layernorm_before = register_module("layernorm_before", tracetorch::nn::LayerNorm(norm));
    attention = register_module("attention", ViTAttention(config));
    layernorm_after = register_module("layernorm_after", tracetorch::nn::LayerNorm(norm));
    intermediate = register_module("intermediate", ViTIntermediate(config));
    output = register_module("output", ViTOutput(config));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) {
    const auto attended = std::get<0>(attention(layernorm_before(hidden_states))) + hidden_states;
    return output(intermediate(layernorm_after(attended)), attended);
  }
  tracetorch::nn::LayerNorm layernorm_before{nullptr}, layernorm_after{nullptr};
  ViTAttention attention{nullptr};
  ViTIntermediate intermediate{nullptr};
  ViTOutput output{nullptr};
};
TRACEABLE(ViTLayer);

struct ViTEncoderImpl : torch::nn::Module {
  explicit ViTEncoderImpl(const ViTConfig& config) {
    layer = register_module("layer", tracetorch::nn::ModuleList());
    for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) layer->push_back(ViTLayer(config));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) {
    auto h = hidden_states;
    for (const auto& block : *layer) h = block->as<ViTLayer>()->forward(h);  // through the holder: traced
    return h;
  }
  tracetorch::nn::ModuleList layer{nullptr};
};
TRACEABLE(ViTEncoder);

/// transformers' BaseModelOutput.
struct BaseModelOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutput, last_hidden_state, hidden_states, attentions);

struct ViTModelImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", ViTLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<ViTSelfAttention, 1>>());

  explicit ViTModelImpl(const ViTConfig& config) : config(config) {
    embeddings = register_module("embeddings", ViTEmbeddings(config));
    encoder = register_module("encoder", ViTEncoder(config));
    layernorm = register_module(
        "layernorm", tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps)));
  }

  /// pixel_values [batch, channels, image_size, image_size] -> last_hidden_state
  /// [batch, 1 + patches, hidden] (the [CLS] position first).
  BaseModelOutput forward(const torch::Tensor& pixel_values, const tracetorch::OutputOptions& options = {}) {
    // As in transformers' ViT, hidden_states end with the encoder's output before the final
    // layernorm, so the last one is not tied to last_hidden_state.
    return tracetorch::capture_outputs(
        *this, options,
        [&] { return BaseModelOutput{.last_hidden_state = layernorm(encoder(embeddings(pixel_values)))}; },
        tracetorch::CaptureSettings{.tie_last_hidden_states = false});
  }

  ViTConfig config;
  ViTEmbeddings embeddings{nullptr};
  ViTEncoder encoder{nullptr};
  tracetorch::nn::LayerNorm layernorm{nullptr};
};
TRACEABLE(ViTModel);

}  // namespace vision
