#pragma once
// A Qwen3 base model (transformers' Qwen3Model, modeling_qwen3.py at commit 000c33fd) on
// tracetorch's shared decoder parts, as upstream's modular_qwen3.py is Llama's classes plus a
// q_norm and a k_norm: the family below restates only what differs from Llama.
//   model(input_ids=...)                                         -> model({.input_ids = ids})
//   decoder_layer(hidden_states, attention_mask=, position_embeddings=, position_ids=,
//                 past_key_values=, use_cache=, cache_position=) -> Qwen3DecoderLayerKeywords
//   self_attn(hidden_states=, attention_mask=, position_ids=, past_key_values=, use_cache=,
//             cache_position=, position_embeddings=)             -> Llama's keywords
// q_norm/k_norm: an RMSNorm over each head of q and k, before the rotation. The MLP's act_fn is
// ACT2FN[config.hidden_act]. past_key_values is in the output only when use_cache.
// Sliding layers get the sliding-window mask over tracetorch's DynamicCache, which keeps every key
// (upstream's DynamicSlidingWindowLayer drops the oldest: the same attention, a smaller cache).

#include <tracetorch/models.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

/// transformers' Qwen3Config keys and defaults (Qwen3-8B's sizes).
struct Qwen3Config {
  std::int64_t vocab_size = 151936;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 22016;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::int64_t num_key_value_heads = 32;
  std::int64_t head_dim = 128;
  std::string hidden_act = "silu";
  std::int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  bool use_cache = true;
  double rope_theta = 10000.0;
  bool attention_bias = false;
  bool use_sliding_window = false;
  std::optional<std::int64_t> sliding_window;  // config.json's value, kept only with use_sliding_window
  std::int64_t max_window_layers = 28;
  std::vector<std::string> layer_types;  // "full_attention" / "sliding_attention", one per layer
  double attention_dropout = 0.0;
  std::optional<std::int64_t> pad_token_id;
  bool output_hidden_states = false;
  bool output_attentions = false;

  /// Reads a transformers config.json (tracetorch::read_config; keys no field takes go to
  /// `report` where given); a wrong type, rope_scaling or sizes that do not fit together are a
  /// tracetorch::Error naming the file and the key.
  static Qwen3Config from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  /// Derives layer_types as Qwen3Config does when they are absent, then checks the sizes.
  void validate(const std::string& where);
};
TRACETORCH_CONFIG(Qwen3Config, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, head_dim, hidden_act, max_position_embeddings, rms_norm_eps, use_cache, rope_theta,
                  attention_bias, use_sliding_window, sliding_window, max_window_layers, layer_types, attention_dropout,
                  pad_token_id, output_hidden_states, output_attentions);

/// Qwen3DecoderLayer.forward's keywords, in the order Qwen3Model passes them.
struct Qwen3DecoderLayerKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<tracetorch::models::PositionEmbeddings> position_embeddings;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<tracetorch::DynamicCache*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(Qwen3DecoderLayerKeywords, attention_mask, position_embeddings, position_ids, past_key_values,
                    use_cache, cache_position);

/// What Qwen3 changes in Llama.
struct Qwen3 : tracetorch::models::DecoderFamily<Qwen3Config> {
  static constexpr std::string_view name = "Qwen3";
  static constexpr bool qk_norm = true;
  static constexpr bool cache_only_when_used = true;
  using Activation = torch::nn::AnyModule;  // ACT2FN[config.hidden_act]
  using DecoderLayerKeywords = Qwen3DecoderLayerKeywords;
  static constexpr bool layers_get_use_cache = true;
};

using Qwen3RMSNorm = tracetorch::models::RMSNorm<Qwen3>;
using Qwen3RotaryEmbedding = tracetorch::models::RotaryEmbedding<Qwen3>;
using Qwen3MLP = tracetorch::models::GatedMLP<Qwen3>;
using Qwen3Attention = tracetorch::models::Attention<Qwen3>;
using Qwen3DecoderLayer = tracetorch::models::DecoderLayer<Qwen3>;
using Qwen3Model = tracetorch::models::Model<Qwen3>;
using BaseModelOutputWithPast = tracetorch::models::BaseModelOutputWithPast;

/// Loads a transformers checkpoint strictly by name (tracetorch::checkpoint::load).
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace qwen3

// Compiled once, in qwen3.cpp.
extern template struct tracetorch::models::RMSNormImpl<qwen3::Qwen3>;
extern template struct tracetorch::models::AttentionImpl<qwen3::Qwen3>;
extern template struct tracetorch::models::DecoderLayerImpl<qwen3::Qwen3>;
extern template struct tracetorch::models::ModelImpl<qwen3::Qwen3>;
