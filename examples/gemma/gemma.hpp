#pragma once
// A Gemma base model in LibTorch that follows upstream transformers' GemmaModel with eager attention
// (src/transformers/models/gemma/modeling_gemma.py at commit c4cdd1a0, the v4.49 era): the same
// module names (embed_tokens, layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
// mlp.act_fn, input_layernorm, post_attention_layernorm}, norm, rotary_emb) and the same call
// conventions, so that its traces equal a transformers trace of the same weights:
//   model(input_ids=ids, use_cache=False)              -> model({.input_ids = ids, .use_cache = false})
//   decoder_layer(hidden_states, attention_mask=, position_ids=, past_key_value=,
//                 output_attentions=, use_cache=, cache_position=, position_embeddings=)
//                                                      -> GemmaDecoderLayerKeywords; returns (hidden_states,)
//                                                         or (hidden_states, attn_weights)
//   self_attn(hidden_states=, ...the same keywords)    -> GemmaAttentionKeywords (keywords only);
//                                                         returns (attn_output, attn_weights)
//   rotary_emb(hidden_states, position_ids)            positional
// Gemma's own steps: the embedding output is multiplied by sqrt(hidden_size) as a 0-d tensor of the
// hidden dtype; GemmaRMSNorm computes in float32 and scales by (1 + weight); the MLP's act_fn is
// ACT2FN[config.hidden_act] (gelu_pytorch_tanh); head_dim comes from the config. The eager causal
// mask of that era, with no attention_mask given, is [batch, 1, seq, past + seq + 1] (one column
// more than the keys: eager attention slices it to the key length).
// Not ported: sdpa/flash attention, rope_scaling other than the default, gradient checkpointing.

#include <tracetorch/cache.hpp>
#include <tracetorch/capture.hpp>
#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/keywords.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace gemma {

/// transformers' GemmaConfig keys, with GemmaConfig's defaults (gemma-7b): a config.json that leaves
/// out head_dim or num_key_value_heads gets 256 and 16, as GemmaConfig(**json) does.
struct GemmaConfig {
  std::int64_t vocab_size = 256000;
  std::int64_t hidden_size = 3072;
  std::int64_t intermediate_size = 24576;
  std::int64_t num_hidden_layers = 28;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 16;
  std::int64_t head_dim = 256;
  std::string hidden_act = "gelu_pytorch_tanh";
  /// Read and kept, unused: GemmaMLP at c4cdd1a0 takes ACT2FN[config.hidden_act].
  std::optional<std::string> hidden_activation;
  std::int64_t max_position_embeddings = 8192;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool attention_bias = false;
  double attention_dropout = 0.0;
  std::optional<std::int64_t> pad_token_id = 0;
  bool use_cache = true;
  bool output_attentions = false;
  bool output_hidden_states = false;
  /// Must stay null: only the default rope is ported.
  boost::json::value rope_scaling;

  /// Reads a transformers config.json (tracetorch::load_config); keys no field takes go to
  /// `report` where given. A key of the wrong type, a rope_scaling, an unknown hidden_act or
  /// sizes that do not fit together are a tracetorch::Error naming the file and the key.
  static GemmaConfig from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  void validate(const std::string& where) const;  // the hook load_config runs
};
TRACETORCH_CONFIG(GemmaConfig, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, head_dim, hidden_act, hidden_activation, max_position_embeddings, rms_norm_eps,
                  rope_theta, attention_bias, attention_dropout, pad_token_id, use_cache, output_attentions,
                  output_hidden_states, rope_scaling);

/// The v4.49-era cache_utils.DynamicCache: tracetorch's (the same update and lengths), recorded
/// as that era's Python records it. The class had no __repr__, so Python's trace holds
/// object.__repr__ with the address masked by the debugger; upstream's later repr
/// (`DynamicCache(layers=[...])`, tracetorch::DynamicCache's) came with v4.57.
struct DynamicCache : tracetorch::DynamicCache {
  using tracetorch::DynamicCache::DynamicCache;
};
inline std::string tracetorch_repr(const DynamicCache&) { return "<transformers.cache_utils.DynamicCache object at 0xXXXXXXXX>"; }

/// (cos, sin), each [batch, seq, head_dim].
using PositionEmbeddings = std::tuple<torch::Tensor, torch::Tensor>;

struct GemmaRMSNormImpl : torch::nn::Module {
  GemmaRMSNormImpl(std::int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // zeros at construction: the norm scales by (1 + weight)
  double eps;
};
TRACEABLE(GemmaRMSNorm);

struct GemmaMLPImpl : torch::nn::Module {
  explicit GemmaMLPImpl(const GemmaConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

  tracetorch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  torch::nn::AnyModule act_fn;  // ACT2FN[config.hidden_act]
};
TRACEABLE(GemmaMLP);

/// The default rope: inv_freq over head_dim, a non-persistent buffer as upstream's (not in the
/// state dict, not in checkpoints), attention_scaling 1.
struct GemmaRotaryEmbeddingImpl : tracetorch::nn::Module {
  explicit GemmaRotaryEmbeddingImpl(const GemmaConfig& config);
  PositionEmbeddings forward(const torch::Tensor& x, const torch::Tensor& position_ids);

  torch::Tensor inv_freq;
  double attention_scaling = 1.0;
};
TRACEABLE(GemmaRotaryEmbedding);

/// What upstream's GemmaModel passes to each decoder layer by keyword (hidden_states positional),
/// in that order: every one, past_key_value=None included.
struct GemmaDecoderLayerKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<DynamicCache*> past_key_value;
  tracetorch::Keyword<bool> output_attentions = tracetorch::defaults_to(false);
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<torch::Tensor> cache_position;
  tracetorch::Keyword<PositionEmbeddings> position_embeddings;
};
TRACETORCH_KEYWORDS(GemmaDecoderLayerKeywords, attention_mask, position_ids, past_key_value, output_attentions,
                    use_cache, cache_position, position_embeddings);

/// What upstream's GemmaDecoderLayer passes to its self_attn, all by keyword: hidden_states, then
/// each of the layer's keywords (`x=x`), in the layer's order.
struct GemmaAttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  GemmaDecoderLayerKeywords layer;
};
TRACETORCH_KEYWORDS(GemmaAttentionKeywords, hidden_states, layer);

struct GemmaAttentionImpl : torch::nn::Module {
  GemmaAttentionImpl(const GemmaConfig& config, std::int64_t layer_idx);
  /// (attn_output, attn_weights), as upstream's eager attention returns them on every call.
  std::tuple<torch::Tensor, torch::Tensor> forward(const GemmaAttentionKeywords& kw);

  std::int64_t head_dim, num_key_value_groups, layer_idx;
  double scaling, attention_dropout;
  tracetorch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TRACEABLE(GemmaAttention);

/// Upstream's layer output, a tuple whose length depends on the call: `(hidden_states,)`, and
/// `(hidden_states, attn_weights)` with output_attentions.
using GemmaDecoderLayerOutput = std::vector<torch::Tensor>;

struct GemmaDecoderLayerImpl : torch::nn::Module {
  GemmaDecoderLayerImpl(const GemmaConfig& config, std::int64_t layer_idx);
  GemmaDecoderLayerOutput forward(const torch::Tensor& hidden_states, const GemmaDecoderLayerKeywords& kw = {});

  GemmaAttention self_attn{nullptr};
  GemmaMLP mlp{nullptr};
  GemmaRMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TRACEABLE(GemmaDecoderLayer);

/// transformers' BaseModelOutputWithPast: None fields are left out of traces, as a ModelOutput's.
struct BaseModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::shared_ptr<DynamicCache> past_key_values;  // null unless use_cache
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, past_key_values, hidden_states, attentions);

/// GemmaModel.forward's keywords, upstream's signature order (return_dict left out: the forward
/// returns the struct, tracetorch::to_tuple gives the tuple). Unset flags come from the config.
struct GemmaModelInputs {
  tracetorch::Keyword<torch::Tensor> input_ids;
  tracetorch::Keyword<torch::Tensor> attention_mask;  // [batch, kv] of 1/0, or a ready 4-d float mask
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<std::shared_ptr<DynamicCache>> past_key_values;
  tracetorch::Keyword<torch::Tensor> inputs_embeds;
  tracetorch::Keyword<bool> use_cache;
  tracetorch::Keyword<bool> output_attentions;
  tracetorch::Keyword<bool> output_hidden_states;
  tracetorch::Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(GemmaModelInputs, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds, use_cache,
                    output_attentions, output_hidden_states, cache_position);

struct GemmaModelImpl : torch::nn::Module {
  /// What GemmaModel at c4cdd1a0 collects by hand: each layer's input, then norm's output
  /// (hidden_states), and each attention's weights (the layer's outputs[1]).
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", GemmaDecoderLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<GemmaAttention, 1>>());

  explicit GemmaModelImpl(const GemmaConfig& config);
  /// `model({.input_ids = ids, .use_cache = false})`, as Python's `model(input_ids=ids,
  /// use_cache=False)`: last_hidden_state [batch, seq, hidden]; the DynamicCache when use_cache
  /// (the config's, default true); hidden_states (layers + 1) and attentions (one [batch, heads,
  /// seq, kv] per layer) when asked for, in the call or the config.
  BaseModelOutputWithPast forward(const GemmaModelInputs& inputs);

  GemmaConfig config;
  tracetorch::nn::Embedding embed_tokens{nullptr};
  tracetorch::nn::ModuleList layers{nullptr};
  GemmaRMSNorm norm{nullptr};
  GemmaRotaryEmbedding rotary_emb{nullptr};

 private:
  BaseModelOutputWithPast run_layers(const GemmaModelInputs& inputs, bool use_cache, bool output_attentions);
};
TRACEABLE(GemmaModel);

/// upstream's _update_causal_mask for eager attention: a 4-d attention_mask as it is; else
/// [batch, 1, seq, target] of 0 where a query may attend and the dtype's minimum elsewhere, with
/// target the 2-d mask's length, or past_seen + seq + 1 without one; a 2-d mask's zeros masked.
torch::Tensor update_causal_mask(const torch::Tensor& attention_mask, const torch::Tensor& input_tensor,
                                 const torch::Tensor& cache_position, std::int64_t past_seen_tokens);

/// Loads a transformers checkpoint (a folder, model.safetensors or a sharded index) strictly by
/// name with tracetorch::checkpoint::load. `DtypePolicy::convert` (the default here) converts a
/// bfloat16 checkpoint into the float32 model, each conversion listed in the report.
tracetorch::checkpoint::Report load_state_dict(
    torch::nn::Module& model, const std::filesystem::path& weights,
    tracetorch::checkpoint::DtypePolicy dtype = tracetorch::checkpoint::DtypePolicy::convert);

}  // namespace gemma
