#pragma once
// A Llama base model in LibTorch that follows upstream transformers' LlamaModel
// (src/transformers/models/llama/modeling_llama.py at commit 9ee3f431, the v4.57 era): the same
// module names (embed_tokens, rotary_emb, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj, mlp.act_fn}, norm) and the same call
// conventions, so that its traces equal a transformers trace of the same weights:
//   model(input_ids=...)                                        -> model({.input_ids = ids})
//   decoder_layer(hidden_states, attention_mask=, position_ids=, past_key_values=,
//                 cache_position=, position_embeddings=)        -> LlamaDecoderLayerKeywords
//   self_attn(hidden_states=, attention_mask=, position_ids=, past_key_values=, use_cache=,
//             cache_position=, position_embeddings=)            -> LlamaAttentionKeywords (keywords only)
//   rotary_emb(hidden_states, position_ids)                     positional
// with `use_cache` from the config (default true) building a DynamicCache, the eager causal mask
// [batch, 1, q, kv] of 0 and float32's minimum, and position_ids [1, seq]. Newer transformers pass
// `use_cache=` to the layers and drop `cache_position`: that convention lives in the two keyword
// structs and LlamaModelImpl::forward, nowhere else.

// Model code needs only the annotation, the traced layers, keywords and output capture; a program
// that traces includes <tracetorch/tracetorch.hpp>. The lighter includes keep Boost.JSON, the
// debugger and std::regex out of this translation unit (docs/performance.md, compile cost).
#include <tracetorch/cache.hpp>
#include <tracetorch/capture.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/keywords.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

namespace llama {

/// transformers' LlamaConfig keys; the defaults are seed 004's config (a half-size Llama 7B).
struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 2048;
  std::int64_t intermediate_size = 5504;
  std::int64_t num_hidden_layers = 16;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 16;
  std::int64_t max_position_embeddings = 1024;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool output_hidden_states = false;
  bool output_attentions = false;
  bool use_cache = true;

  /// Reads a transformers config.json; unknown keys are ignored, a key of the wrong type or
  /// an inconsistent config is a tracetorch::Error naming the file.
  static LlamaConfig from_json_file(const std::filesystem::path& path);
  /// Throws tracetorch::Error when sizes do not fit together (e.g. heads not dividing hidden).
  void validate(const std::string& where) const;
};

using PositionEmbeddings = std::tuple<torch::Tensor, torch::Tensor>;

struct LlamaRMSNormImpl : torch::nn::Module {
  LlamaRMSNormImpl(std::int64_t hidden_size, double eps);
  torch::Tensor forward(const torch::Tensor& hidden_states);

  torch::Tensor weight;
  double variance_epsilon;
};
TRACEABLE(LlamaRMSNorm);

struct LlamaRotaryEmbeddingImpl : torch::nn::Module {
  explicit LlamaRotaryEmbeddingImpl(const LlamaConfig& config);
  PositionEmbeddings forward(const torch::Tensor& x, const torch::Tensor& position_ids);

  torch::Tensor inv_freq;  // not registered: transformers keeps it out of the state dict
};
TRACEABLE(LlamaRotaryEmbedding);

struct LlamaMLPImpl : torch::nn::Module {
  explicit LlamaMLPImpl(const LlamaConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  tracetorch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  tracetorch::nn::SiLU act_fn{nullptr};
};
TRACEABLE(LlamaMLP);

/// What upstream's LlamaDecoderLayer passes to its self_attn, all by keyword, in that order.
struct LlamaAttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<tracetorch::DynamicCache*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<torch::Tensor> cache_position;
  tracetorch::Keyword<PositionEmbeddings> position_embeddings;
};
TRACETORCH_KEYWORDS(LlamaAttentionKeywords, hidden_states, attention_mask, position_ids, past_key_values, use_cache,
                    cache_position, position_embeddings);

struct LlamaAttentionImpl : torch::nn::Module {
  LlamaAttentionImpl(const LlamaConfig& config, std::int64_t layer_idx);
  /// Returns (attn_output, attn_weights) as transformers' eager attention does.
  std::tuple<torch::Tensor, torch::Tensor> forward(const LlamaAttentionKeywords& kw);

  std::int64_t head_dim, num_heads, num_kv_heads, layer_idx;
  double scaling;
  tracetorch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TRACEABLE(LlamaAttention);

/// What upstream's LlamaModel passes to each decoder layer by keyword (hidden_states is positional),
/// in that order. `use_cache` is the layer's own default (false) unless a caller passes it.
struct LlamaDecoderLayerKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<tracetorch::DynamicCache*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<torch::Tensor> cache_position;
  tracetorch::Keyword<PositionEmbeddings> position_embeddings;
};
TRACETORCH_KEYWORDS(LlamaDecoderLayerKeywords, attention_mask, position_ids, past_key_values, use_cache, cache_position,
                    position_embeddings);

struct LlamaDecoderLayerImpl : torch::nn::Module {
  LlamaDecoderLayerImpl(const LlamaConfig& config, std::int64_t layer_idx);
  torch::Tensor forward(const torch::Tensor& hidden_states, const LlamaDecoderLayerKeywords& kw = {});

  LlamaAttention self_attn{nullptr};
  LlamaMLP mlp{nullptr};
  LlamaRMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TRACEABLE(LlamaDecoderLayer);

/// transformers' BaseModelOutputWithPast: absent fields are left out of traces, as a ModelOutput does.
struct BaseModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::shared_ptr<tracetorch::DynamicCache> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, past_key_values, hidden_states, attentions);

/// LlamaModel.forward's keyword inputs (upstream's signature order). `use_cache`,
/// `output_hidden_states` and `output_attentions` are in tracetorch::OutputOptions.
struct LlamaModelInputs {
  tracetorch::Keyword<torch::Tensor> input_ids;
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<std::shared_ptr<tracetorch::DynamicCache>> past_key_values;
  tracetorch::Keyword<torch::Tensor> inputs_embeds;
  tracetorch::Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(LlamaModelInputs, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds,
                    cache_position);

struct LlamaModelImpl : torch::nn::Module {
  /// transformers' LlamaPreTrainedModel._can_record_outputs.
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", LlamaDecoderLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<LlamaAttention, 1>>());

  explicit LlamaModelImpl(const LlamaConfig& config);
  /// `model({.input_ids = ids})`, as Python's `model(input_ids=ids)`: last_hidden_state
  /// [batch, seq, hidden], the DynamicCache when use_cache (the config's, default true), and
  /// hidden_states (layers + 1) and attentions (one [batch, heads, seq, seq] per layer) when asked
  /// for, in the call's options or the config.
  BaseModelOutputWithPast forward(const LlamaModelInputs& inputs, const tracetorch::OutputOptions& options = {});

  LlamaConfig config;
  tracetorch::nn::Embedding embed_tokens{nullptr};
  tracetorch::nn::ModuleList layers{nullptr};
  LlamaRMSNorm norm{nullptr};
  LlamaRotaryEmbedding rotary_emb{nullptr};

 private:
  BaseModelOutputWithPast run_layers(const LlamaModelInputs& inputs, bool use_cache);
};
TRACEABLE(LlamaModel);

/// upstream's create_causal_mask for eager attention without padding: [batch, 1, q, kv], 0 where a
/// query may attend, float32's minimum elsewhere.
torch::Tensor create_causal_mask(std::int64_t batch, std::int64_t kv_length, const torch::Tensor& cache_position,
                                 const torch::TensorOptions& options);

/// Loads a transformers checkpoint (a folder, model.safetensors or a sharded index) by name with
/// tracetorch::checkpoint::load: strict, dtypes kept. Every parameter of the model must be in the
/// checkpoint with the same shape and dtype and nothing else may be: otherwise a tracetorch::Error
/// names the tensor and the file, and the model is left unchanged.
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace llama
