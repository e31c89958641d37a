#pragma once
// A Gemma2 base model (transformers' Gemma2Model, modular_gemma2.py in its transformers 5.x form:
// layer_types, rope_parameters, past_key_values, DynamicCache(config=...)) on tracetorch's shared
// decoder parts, as modular_gemma2.py is Gemma's and Llama's classes with a few changes. The family
// below restates what differs; the shared parts read the rest from the config:
//   - RMSNorm<F> as GemmaRMSNorm ((1 + weight), in float32), the embeddings times sqrt(hidden_size)
//     after rotary_emb (which records the unscaled ones), ACT2FN[config.hidden_activation];
//   - Attention<F> scaled by query_pre_attn_scalar ** -0.5 and its logits soft-capped,
//     tanh(x / cap) * cap, before the mask (config.attn_logit_softcapping);
//   - Model<F>'s DynamicCache(config=...) holds a DynamicSlidingWindowLayer for each sliding layer
//     of layer_types, and each layer gets the mask of its type.
// The decoder layer is this port's own (FamilyDecoderLayer<Gemma2>): four norms, post_attention_
// layernorm on the attention's output before the residual add, pre_/post_feedforward_layernorm
// around the MLP.
// Call conventions (what the debugger records):
//   model(input_ids=...)                                  -> model({.input_ids = ids})
//   decoder_layer(hidden_states, attention_mask=, position_embeddings=, position_ids=,
//                 past_key_values=, cache_position=)      -> Gemma2DecoderLayerKeywords (no use_cache)
//   self_attn(hidden_states=, position_embeddings=, attention_mask=, position_ids=,
//             past_key_values=, cache_position=)          -> Gemma2AttentionKeywords
//   rotary_emb(hidden_states, position_ids)               positional

#include <tracetorch/models.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemma2 {

/// transformers 5.x's rope_parameters: only the "default" type is ported.
struct RopeParameters {
  std::string rope_type = "default";
  double rope_theta = 10000.0;
};
TRACETORCH_CONFIG(RopeParameters, rope_type, rope_theta);

/// transformers' Gemma2Config keys and defaults (gemma-2-2b's sizes).
struct Gemma2Config {
  std::int64_t vocab_size = 256000;
  std::int64_t hidden_size = 2304;
  std::int64_t intermediate_size = 9216;
  std::int64_t num_hidden_layers = 26;
  std::int64_t num_attention_heads = 8;
  std::int64_t num_key_value_heads = 4;
  std::int64_t head_dim = 256;
  std::string hidden_activation = "gelu_pytorch_tanh";  // the MLP's ACT2FN key
  std::int64_t max_position_embeddings = 8192;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  bool use_cache = true;
  std::optional<std::int64_t> pad_token_id = 0;
  std::optional<std::int64_t> eos_token_id = 1;
  std::optional<std::int64_t> bos_token_id = 2;
  bool tie_word_embeddings = true;
  RopeParameters rope_parameters;
  bool attention_bias = false;
  double attention_dropout = 0.0;
  double query_pre_attn_scalar = 256;
  std::optional<std::int64_t> sliding_window = 4096;
  std::vector<std::string> layer_types;  // derived by validate when absent, as Gemma2Config derives them
  std::optional<double> final_logit_softcapping = 30.0;  // Gemma2ForCausalLM's; read, unused here
  std::optional<double> attn_logit_softcapping = 50.0;
  std::optional<bool> use_bidirectional_attention;  // only null or false is ported
  bool output_hidden_states = false;
  bool output_attentions = false;

  static Gemma2Config from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  /// Derives layer_types when empty (sliding first, then every other layer), then checks.
  void validate(const std::string& where);
};
TRACETORCH_CONFIG(Gemma2Config, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, head_dim, hidden_activation, max_position_embeddings, initializer_range,
                  rms_norm_eps, use_cache, pad_token_id, eos_token_id, bos_token_id, tie_word_embeddings,
                  rope_parameters, attention_bias, attention_dropout, query_pre_attn_scalar, sliding_window,
                  layer_types, final_logit_softcapping, attn_logit_softcapping, use_bidirectional_attention,
                  output_hidden_states, output_attentions);

using tracetorch::Keyword;
using tracetorch::models::PositionEmbeddings;

/// Gemma2DecoderLayer.forward's keywords, in the order Gemma2Model passes them.
struct Gemma2DecoderLayerKeywords {
  Keyword<torch::Tensor> attention_mask;
  Keyword<PositionEmbeddings> position_embeddings;
  Keyword<torch::Tensor> position_ids;
  Keyword<tracetorch::DynamicCache*> past_key_values;
  Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(Gemma2DecoderLayerKeywords, attention_mask, position_embeddings, position_ids, past_key_values,
                    cache_position);

/// What Gemma2DecoderLayer passes its self_attn, all by keyword, in that order.
struct Gemma2AttentionKeywords {
  Keyword<torch::Tensor> hidden_states;
  Keyword<PositionEmbeddings> position_embeddings;
  Keyword<torch::Tensor> attention_mask;
  Keyword<torch::Tensor> position_ids;
  Keyword<tracetorch::DynamicCache*> past_key_values;
  Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(Gemma2AttentionKeywords, hidden_states, position_embeddings, attention_mask, position_ids,
                    past_key_values, cache_position);

/// What Gemma2 changes in Llama (the scaling and soft-cap come from the config's fields).
struct Gemma2 : tracetorch::models::DecoderFamily<Gemma2Config> {
  static constexpr std::string_view name = "Gemma2";
  static constexpr auto rms_norm = tracetorch::models::RMSNormKind::one_plus_weight;
  static constexpr bool scale_embeddings = true;
  using Activation = torch::nn::AnyModule;  // ACT2FN[config.hidden_activation]
  using DecoderLayerKeywords = Gemma2DecoderLayerKeywords;
  using AttentionKeywords = Gemma2AttentionKeywords;
  static Gemma2AttentionKeywords attention_keywords(const torch::Tensor& hidden_states, const Gemma2DecoderLayerKeywords& kw);
};

using Gemma2RMSNorm = tracetorch::models::RMSNorm<Gemma2>;
using Gemma2MLP = tracetorch::models::GatedMLP<Gemma2>;
using Gemma2RotaryEmbedding = tracetorch::models::RotaryEmbedding<Gemma2>;
using Gemma2Attention = tracetorch::models::Attention<Gemma2>;

/// Gemma2DecoderLayer: input_layernorm, self_attn, post_attention_layernorm, the residual add;
/// pre_feedforward_layernorm, mlp, post_feedforward_layernorm, the residual add.
struct Gemma2DecoderLayerImpl : torch::nn::Module {
  Gemma2DecoderLayerImpl(const Gemma2Config& config, std::int64_t layer_idx);
  torch::Tensor forward(const torch::Tensor& hidden_states, const Gemma2DecoderLayerKeywords& kw = {});

  Gemma2Attention self_attn{nullptr};
  Gemma2MLP mlp{nullptr};
  Gemma2RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Gemma2RMSNorm pre_feedforward_layernorm{nullptr}, post_feedforward_layernorm{nullptr};
};
TRACEABLE(Gemma2DecoderLayer);

}  // namespace gemma2

/// Gemma2Model is made of Gemma2DecoderLayers.
template <>
struct tracetorch::models::FamilyDecoderLayer<gemma2::Gemma2> {
  using type = gemma2::Gemma2DecoderLayer;
};

namespace gemma2 {

using Gemma2Model = tracetorch::models::Model<Gemma2>;
using BaseModelOutputWithPast = tracetorch::models::BaseModelOutputWithPast;

/// Loads a transformers checkpoint strictly by name (tracetorch::checkpoint::load).
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace gemma2

// Compiled once, in gemma2.cpp.
extern template struct tracetorch::models::RMSNormImpl<gemma2::Gemma2>;
extern template struct tracetorch::models::GatedMLPImpl<gemma2::Gemma2>;
extern template struct tracetorch::models::AttentionImpl<gemma2::Gemma2>;
extern template struct tracetorch::models::ModelImpl<gemma2::Gemma2>;
