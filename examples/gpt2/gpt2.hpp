#pragma once
// A GPT-2 base model in LibTorch that follows upstream transformers' GPT2Model with eager attention
// (src/transformers/models/gpt2/modeling_gpt2.py at commit c44b2d99, the v4.4x era with tuple caches):
// the same module names (wte, wpe, drop, h.N.{ln_1, attn.{c_attn, c_proj, attn_dropout, resid_dropout},
// ln_2, mlp.{c_fc, act, c_proj, dropout}}, ln_f) and the same call conventions, so that its traces
// equal a transformers trace of the same weights:
//   model(input_ids=...)                                            -> model({.input_ids = ids})
//   block(hidden_states, layer_past=, attention_mask=, head_mask=,
//         encoder_hidden_states=, encoder_attention_mask=, use_cache=, output_attentions=)
//                                                                   -> GPT2BlockKeywords
//   attn(hidden_states, layer_past=, attention_mask=, head_mask=, use_cache=, output_attentions=)
//                                                                   -> GPT2AttentionKeywords
// The causal mask is the attention's non-persistent `bias` buffer (kept out of the state dict, as
// upstream registers it with persistent=False); the cache is upstream's tuple of (key, value) per
// layer; the MLP's activation comes from ACT2FN[config.activation_function] (gelu_new for GPT-2).
// hidden_states and attentions are captured by a record map (GPT2ModelImpl::can_record_outputs) in
// place of upstream's hand-collected tuples: the same values, in the same order.
// Not ported: cross-attention, head_mask values, token_type_ids, sdpa/flash attention.

#include <tracetorch/capture.hpp>
#include <tracetorch/config_file.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/keywords.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace gpt2 {

/// transformers' GPT2Config keys (n_embd, n_layer, n_head, n_positions, n_inner, ...).
struct GPT2Config {
  std::int64_t vocab_size = 50257;
  std::int64_t n_positions = 1024;
  std::int64_t n_embd = 768;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::optional<std::int64_t> n_inner;  // None: 4 * n_embd
  std::string activation_function = "gelu_new";
  double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;
  bool use_cache = true;
  bool output_attentions = false;
  bool output_hidden_states = false;

  /// Reads a transformers config.json (tracetorch::load_config), upstream's attribute_map
  /// spellings included (`hidden_size` for n_embd); keys no field takes go to `report` where
  /// given; a key of the wrong type, an unknown activation or inconsistent sizes are a
  /// tracetorch::Error naming the file.
  static GPT2Config from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  void validate(const std::string& where) const;  // the hook load_config runs
};
TRACETORCH_CONFIG(GPT2Config, vocab_size, n_positions, n_embd, n_layer, n_head, n_inner, activation_function, resid_pdrop,
                  embd_pdrop, attn_pdrop, layer_norm_epsilon, scale_attn_weights, scale_attn_by_inverse_layer_idx, use_cache,
                  output_attentions, output_hidden_states);
// GPT2Config's attribute_map: a config.json may spell the sizes as other models do.
TRACETORCH_CONFIG_ATTRIBUTE_MAP(GPT2Config, {{"hidden_size", "n_embd"},
                                             {"max_position_embeddings", "n_positions"},
                                             {"num_attention_heads", "n_head"},
                                             {"num_hidden_layers", "n_layer"}});

/// One layer's cached (key, value), each [batch, heads, seq, head_dim]: upstream's `layer_past`.
using LayerPast = std::tuple<torch::Tensor, torch::Tensor>;

struct GPT2MLPImpl : torch::nn::Module {
  GPT2MLPImpl(std::int64_t intermediate_size, const GPT2Config& config);
  torch::Tensor forward(const torch::Tensor& hidden_states);

  tracetorch::nn::Conv1D c_fc{nullptr}, c_proj{nullptr};
  torch::nn::AnyModule act;
  tracetorch::nn::Dropout dropout{nullptr};
};
TRACEABLE(GPT2MLP);

/// The keywords of upstream's GPT2Attention.forward (hidden_states is positional), in its
/// signature order; a call records only those it passes.
struct GPT2AttentionKeywords {
  tracetorch::Keyword<LayerPast> layer_past;
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> head_mask;
  tracetorch::Keyword<torch::Tensor> encoder_hidden_states;
  tracetorch::Keyword<torch::Tensor> encoder_attention_mask;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<bool> output_attentions = tracetorch::defaults_to(false);
};
TRACETORCH_KEYWORDS(GPT2AttentionKeywords, layer_past, attention_mask, head_mask, encoder_hidden_states,
                    encoder_attention_mask, use_cache, output_attentions);

/// (output, present, attention weights): present is the (key, value) so far when use_cache, the
/// weights are defined when output_attentions (upstream's tuple `a, present, (attentions)`).
using AttentionOutput = std::tuple<torch::Tensor, std::optional<LayerPast>, torch::Tensor>;

struct GPT2AttentionImpl : tracetorch::nn::Module {
  GPT2AttentionImpl(const GPT2Config& config, std::int64_t layer_idx);
  AttentionOutput forward(const torch::Tensor& hidden_states, const GPT2AttentionKeywords& kw = {});

  std::int64_t embed_dim, num_heads, head_dim, split_size, layer_idx;
  bool scale_attn_weights, scale_attn_by_inverse_layer_idx;
  torch::Tensor bias, masked_bias;  // non-persistent buffers, as upstream's
  tracetorch::nn::Conv1D c_attn{nullptr}, c_proj{nullptr};
  tracetorch::nn::Dropout attn_dropout{nullptr}, resid_dropout{nullptr};

 private:
  std::tuple<torch::Tensor, torch::Tensor> attn(const torch::Tensor& query, const torch::Tensor& key,
                                                const torch::Tensor& value, const torch::Tensor& attention_mask,
                                                const torch::Tensor& head_mask);
};
TRACEABLE(GPT2Attention);

/// What upstream's GPT2Model passes to each block by keyword: the attention's signature, the same
/// names in the same order.
using GPT2BlockKeywords = GPT2AttentionKeywords;

/// Upstream's block output, whose length depends on the call: `(hidden_states, present,
/// (attentions))` with use_cache, `(hidden_states, (attentions))` without, the weights only when
/// output_attentions. A list of tensors, so that a recorder can index it per call: `present`,
/// upstream's (key, value), is stacked into one [2, batch, heads, seq, head_dim] tensor.
using GPT2BlockOutput = std::vector<torch::Tensor>;

struct GPT2BlockImpl : torch::nn::Module {
  GPT2BlockImpl(const GPT2Config& config, std::int64_t layer_idx);
  GPT2BlockOutput forward(const torch::Tensor& hidden_states, const GPT2BlockKeywords& kw = {});

  tracetorch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  GPT2Attention attn{nullptr};
  GPT2MLP mlp{nullptr};
};
TRACEABLE(GPT2Block);

/// transformers' BaseModelOutputWithPastAndCrossAttentions: absent fields are left out of traces.
struct BaseModelOutputWithPastAndCrossAttentions {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<LayerPast>> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> cross_attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPastAndCrossAttentions, last_hidden_state, past_key_values, hidden_states,
                  attentions, cross_attentions);

/// GPT2Model.forward's keyword inputs, upstream's signature order (token_type_ids, head_mask and the
/// encoder inputs of cross-attention are not ported).
struct GPT2ModelInputs {
  tracetorch::Keyword<torch::Tensor> input_ids;
  tracetorch::Keyword<std::vector<LayerPast>> past_key_values;
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<torch::Tensor> position_ids;
  tracetorch::Keyword<torch::Tensor> inputs_embeds;
  tracetorch::Keyword<bool> use_cache;
  tracetorch::Keyword<bool> output_attentions;
  tracetorch::Keyword<bool> output_hidden_states;
};
TRACETORCH_KEYWORDS(GPT2ModelInputs, input_ids, past_key_values, attention_mask, position_ids, inputs_embeds, use_cache,
                    output_attentions, output_hidden_states);

/// Where a block's output holds its attention weights: upstream's GPT2Model reads
/// `outputs[2 if use_cache else 1]` (the block's use_cache defaults to False).
inline std::int64_t block_attentions_index(const tracetorch::CallKeywords& kw) {
  return kw.flag("use_cache").value_or(false) ? 2 : 1;
}

struct GPT2ModelImpl : torch::nn::Module {
  /// What GPT2Model at c44b2d99 collects by hand (it has no `_can_record_outputs`): each block's
  /// input then ln_f's output (hidden_states), each block's weights at the index its call gives.
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", GPT2Block>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<GPT2Block, block_attentions_index>>());

  explicit GPT2ModelImpl(const GPT2Config& config);
  /// `model({.input_ids = ids})`, as Python's `model(input_ids=ids)`: last_hidden_state [batch,
  /// seq, n_embd]; past_key_values (one (key, value) per layer) when use_cache (the config's,
  /// default true); hidden_states (n_layer + 1) and attentions when asked for, captured by
  /// can_record_outputs.
  BaseModelOutputWithPastAndCrossAttentions forward(const GPT2ModelInputs& inputs);

  GPT2Config config;
  tracetorch::nn::Embedding wte{nullptr}, wpe{nullptr};
  tracetorch::nn::Dropout drop{nullptr};
  tracetorch::nn::ModuleList h{nullptr};
  tracetorch::nn::LayerNorm ln_f{nullptr};

 private:
  BaseModelOutputWithPastAndCrossAttentions run_blocks(const GPT2ModelInputs& inputs, bool use_cache,
                                                       bool output_attentions);
};
TRACEABLE(GPT2Model);

/// Loads a transformers GPT2Model checkpoint strictly by name (tracetorch::checkpoint::load: a
/// folder, model.safetensors or a sharded index; dtypes kept): the attention's causal-mask buffers
/// are non-persistent, so neither expected nor accepted.
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace gpt2
