#pragma once
// A Llama-architecture model in LibTorch with transformers' module names and call structure
// (embed_tokens, rotary_emb, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj, mlp.act_fn}, norm): grouped-query
// attention, rotary embeddings, eager attention that returns its weights. Annotated with
// tracetorch, so its traces line up with transformers' LlamaModel module by module.

// Model code needs only the annotation, the traced layers and output capture; a program that
// traces includes <tracetorch/tracetorch.hpp>. The lighter includes keep Boost.JSON, the
// debugger and std::regex out of this translation unit (docs/performance.md, compile cost).
#include <tracetorch/capture.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cstdint>
#include <filesystem>
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

struct LlamaAttentionImpl : torch::nn::Module {
  LlamaAttentionImpl(const LlamaConfig& config, std::int64_t layer_idx);
  /// Returns (attn_output, attn_weights) as transformers' eager attention does.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states,
                                                   const PositionEmbeddings& position_embeddings,
                                                   const torch::Tensor& attention_mask);

  std::int64_t head_dim, num_heads, num_kv_heads, layer_idx;
  double scaling;
  tracetorch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TRACEABLE(LlamaAttention);

struct LlamaDecoderLayerImpl : torch::nn::Module {
  LlamaDecoderLayerImpl(const LlamaConfig& config, std::int64_t layer_idx);
  torch::Tensor forward(const torch::Tensor& hidden_states, const PositionEmbeddings& position_embeddings,
                        const torch::Tensor& attention_mask);

  LlamaAttention self_attn{nullptr};
  LlamaMLP mlp{nullptr};
  LlamaRMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TRACEABLE(LlamaDecoderLayer);

/// transformers' BaseModelOutputWithPast (without the cache, which this port does not keep).
struct BaseModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, hidden_states, attentions);

struct LlamaModelImpl : torch::nn::Module {
  /// transformers' LlamaPreTrainedModel._can_record_outputs.
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", LlamaDecoderLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<LlamaAttention, 1>>());

  explicit LlamaModelImpl(const LlamaConfig& config);
  /// last_hidden_state [batch, seq, hidden]; hidden_states (layers + 1) and attentions (one
  /// [batch, heads, seq, seq] per layer) when asked for, in the call's options or the config.
  BaseModelOutputWithPast forward(const torch::Tensor& input_ids, const tracetorch::OutputOptions& options = {});

  LlamaConfig config;
  tracetorch::nn::Embedding embed_tokens{nullptr};
  tracetorch::nn::ModuleList layers{nullptr};
  LlamaRMSNorm norm{nullptr};
  LlamaRotaryEmbedding rotary_emb{nullptr};

 private:
  torch::Tensor run_layers(const torch::Tensor& input_ids);
};
TRACEABLE(LlamaModel);

/// Loads a transformers state dict (safetensors) by name. Every parameter of the model must
/// be in the file with the same shape and nothing else may be: otherwise a tracetorch::Error
/// names the tensor and the file.
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace llama
