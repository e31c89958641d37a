#pragma once
// A Llama base model in LibTorch that follows upstream transformers' LlamaModel
// (src/transformers/models/llama/modeling_llama.py at commit 9ee3f431, the v4.57 era), built on
// tracetorch's shared decoder parts (<tracetorch/models.hpp>) as the family `Llama`: Llama's
// conventions are the parts' defaults, so the family only names itself. The same module names
// (embed_tokens, rotary_emb, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj, mlp.act_fn}, norm) and the same call
// conventions, so that its traces equal a transformers trace of the same weights:
//   model(input_ids=..., attention_mask=...)                    -> model({.input_ids = ids, .attention_mask = m})
//   decoder_layer(hidden_states, attention_mask=, position_ids=, past_key_values=,
//                 cache_position=, position_embeddings=)        -> LlamaDecoderLayerKeywords
//   self_attn(hidden_states=, attention_mask=, position_ids=, past_key_values=, use_cache=,
//             cache_position=, position_embeddings=)            -> LlamaAttentionKeywords (keywords only)
//   rotary_emb(hidden_states, position_ids)                     positional
// with `use_cache` from the config (default true) building a DynamicCache, the eager causal mask
// [batch, 1, q, kv] of 0 and float32's minimum (a padding attention_mask [batch, seq] of 1/0
// masks its zeros, as create_causal_mask does), and position_ids [1, seq]. rope_scaling: the
// default rope and Llama 3's ("llama3").

// Model code needs only the annotation, the traced layers, keywords and output capture; a program
// that traces includes <tracetorch/tracetorch.hpp>. The lighter includes keep Boost.JSON, the
// debugger and std::regex out of this translation unit (docs/performance.md, compile cost).
#include <tracetorch/models.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace llama {

/// transformers' LlamaConfig keys; the defaults are seed 004's config (a half-size Llama 7B).
struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 2048;
  std::int64_t intermediate_size = 5504;
  std::int64_t num_hidden_layers = 16;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 16;
  std::string hidden_act = "silu";  // the MLP's activation: only SiLU is ported
  std::int64_t max_position_embeddings = 1024;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool output_hidden_states = false;
  bool output_attentions = false;
  bool use_cache = true;
  /// null: the default rope; {"rope_type": "llama3", "factor": ..., ...}: Llama 3's.
  std::optional<tracetorch::models::RopeScaling> rope_scaling;
  bool attention_bias = false;
  bool mlp_bias = false;
  std::optional<std::int64_t> head_dim;  // null: hidden_size / num_attention_heads

  /// Reads a transformers config.json (tracetorch::read_config); keys no field takes go to
  /// `report` where given, a key of the wrong type or an inconsistent config is a
  /// tracetorch::Error naming the file.
  static LlamaConfig from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  /// Throws tracetorch::Error when sizes do not fit together (e.g. heads not dividing hidden).
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(LlamaConfig, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, hidden_act, max_position_embeddings, rms_norm_eps, rope_theta, output_hidden_states,
                  output_attentions, use_cache, rope_scaling, attention_bias, mlp_bias, head_dim);

/// The family: Llama's conventions are the shared parts' defaults.
struct Llama : tracetorch::models::DecoderFamily<LlamaConfig> {
  static constexpr std::string_view name = "Llama";
};

using PositionEmbeddings = tracetorch::models::PositionEmbeddings;
using LlamaAttentionKeywords = tracetorch::models::AttentionKeywords;
using LlamaDecoderLayerKeywords = tracetorch::models::DecoderLayerKeywords;
using LlamaModelInputs = tracetorch::models::ModelInputs;
using BaseModelOutputWithPast = tracetorch::models::BaseModelOutputWithPast;

using LlamaRMSNormImpl = tracetorch::models::RMSNormImpl<Llama>;
using LlamaRMSNorm = tracetorch::models::RMSNorm<Llama>;
using LlamaRotaryEmbeddingImpl = tracetorch::models::RotaryEmbeddingImpl<Llama>;
using LlamaRotaryEmbedding = tracetorch::models::RotaryEmbedding<Llama>;
using LlamaMLPImpl = tracetorch::models::GatedMLPImpl<Llama>;
using LlamaMLP = tracetorch::models::GatedMLP<Llama>;
using LlamaAttentionImpl = tracetorch::models::AttentionImpl<Llama>;
using LlamaAttention = tracetorch::models::Attention<Llama>;
using LlamaDecoderLayerImpl = tracetorch::models::DecoderLayerImpl<Llama>;
using LlamaDecoderLayer = tracetorch::models::DecoderLayer<Llama>;
using LlamaModelImpl = tracetorch::models::ModelImpl<Llama>;
using LlamaModel = tracetorch::models::Model<Llama>;

/// Loads a transformers checkpoint (a folder, model.safetensors or a sharded index) by name with
/// tracetorch::checkpoint::load: strict, dtypes kept. Every parameter of the model must be in the
/// checkpoint with the same shape and dtype and nothing else may be: otherwise a tracetorch::Error
/// names the tensor and the file, and the model is left unchanged.
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace llama

// Compiled once, in llama.cpp.
extern template struct tracetorch::models::RMSNormImpl<llama::Llama>;
extern template struct tracetorch::models::AttentionImpl<llama::Llama>;
extern template struct tracetorch::models::DecoderLayerImpl<llama::Llama>;
extern template struct tracetorch::models::ModelImpl<llama::Llama>;
