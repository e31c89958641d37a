#pragma once
// A Qwen2-MoE base model (transformers' Qwen2MoeModel, modeling_qwen2_moe.py at commit 0233e509)
// on tracetorch's shared decoder parts: the family below restates what differs from Llama, and
// the sparse MoE block is the port's own (its router and experts each declared Replaceable, so
// that register_patch_mapping builds a replacement where they stand).
//   model(input_ids=..., use_cache=False, output_router_logits=True)
//     -> model({.input_ids = ids}, tracetorch::output_options({{"use_cache", false}, {"output_router_logits", true}}))
//   decoder_layer(hidden_states, attention_mask=, position_ids=, past_key_values=, use_cache=,
//                 cache_position=, position_embeddings=, **kwargs)   Llama's keywords, use_cache passed;
//   self_attn(hidden_states=, ..., position_embeddings=, **kwargs)   the call's output_* flags handed
//                                                                    on as tracetorch::Kwargs
//   mlp(h): Qwen2MoeSparseMoeBlock (shared_expert, gate, experts, shared_expert_gate), or
//           Qwen2MoeMLP for mlp_only_layers and layers off decoder_sparse_step
// q/k/v carry a bias (qkv_bias), o_proj none; rope_parameters {rope_type, rope_theta};
// past_key_values in the output only when use_cache; router_logits captured from each router's
// output 0 (OutputRecorder(Qwen2MoeTopKRouter, index=0)).

#include <tracetorch/config_file.hpp>
#include <tracetorch/models.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace qwen2_moe {

/// transformers 5.x's rope_parameters: only the "default" type is ported.
struct RopeParameters {
  std::string rope_type = "default";
  double rope_theta = 10000.0;
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(RopeParameters, rope_type, rope_theta);

/// Qwen2MoeConfig's keys and defaults (configuration_qwen2_moe.py at 008e5743), as config.json
/// holds them.
struct Qwen2MoeConfig {
  std::vector<std::string> architectures;
  std::string model_type = "qwen2_moe";
  std::int64_t vocab_size = 151936;
  std::int64_t hidden_size = 2048;
  std::int64_t intermediate_size = 5632;
  std::int64_t num_hidden_layers = 24;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 16;
  std::string hidden_act = "silu";
  std::int64_t max_position_embeddings = 32768;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  bool use_cache = true;
  bool tie_word_embeddings = false;
  RopeParameters rope_parameters;
  bool use_sliding_window = false;
  std::optional<std::int64_t> sliding_window;  // config.json writes 0 when not used
  std::int64_t max_window_layers = 28;
  double attention_dropout = 0.0;
  std::int64_t decoder_sparse_step = 1;
  std::int64_t moe_intermediate_size = 1408;
  std::int64_t shared_expert_intermediate_size = 5632;
  std::int64_t num_experts_per_tok = 4;
  std::int64_t num_experts = 60;
  bool norm_topk_prob = false;
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
  std::vector<std::int64_t> mlp_only_layers;
  bool qkv_bias = true;
  std::vector<std::string> layer_types;  // "full_attention" only: sliding layers are not ported
  std::optional<std::int64_t> pad_token_id;
  std::optional<std::int64_t> bos_token_id;
  std::optional<std::int64_t> eos_token_id;
  std::string dtype = "float32";
  bool output_hidden_states = false;
  bool output_attentions = false;

  /// Reads a transformers config.json (tracetorch::load_config; keys no field takes go to
  /// `report`); a wrong type or sizes that do not fit together are a tracetorch::Error naming
  /// the file and the key.
  static Qwen2MoeConfig from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  /// Whether layer `layer_idx` is a sparse MoE block (Qwen2MoeDecoderLayer's rule).
  bool is_sparse_layer(std::int64_t layer_idx) const;
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(Qwen2MoeConfig, architectures, model_type, vocab_size, hidden_size, intermediate_size,
                  num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_act, max_position_embeddings,
                  initializer_range, rms_norm_eps, use_cache, tie_word_embeddings, rope_parameters,
                  use_sliding_window, sliding_window, max_window_layers, attention_dropout, decoder_sparse_step,
                  moe_intermediate_size, shared_expert_intermediate_size, num_experts_per_tok, num_experts,
                  norm_topk_prob, output_router_logits, router_aux_loss_coef, mlp_only_layers, qkv_bias,
                  layer_types, pad_token_id, bos_token_id, eos_token_id, dtype, output_hidden_states,
                  output_attentions);

/// MoeModelOutputWithPast: router_logits, one [tokens, num_experts] per sparse layer.
struct MoeModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::shared_ptr<tracetorch::DynamicCache> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> router_logits;
};
TRACETORCH_OUTPUT(MoeModelOutputWithPast, last_hidden_state, past_key_values, hidden_states, attentions, router_logits);

/// What Qwen2-MoE changes in Llama.
struct Qwen2Moe : tracetorch::models::DecoderFamily<Qwen2MoeConfig> {
  static constexpr std::string_view name = "Qwen2Moe";
  static constexpr bool cache_only_when_used = true;
  static constexpr bool hand_on_output_flags = true;  // capture_outputs reads them with kwargs.get
  using Activation = torch::nn::AnyModule;            // ACT2FN[config.hidden_act]
  using MLP = torch::nn::AnyModule;                   // Qwen2MoeSparseMoeBlock or Qwen2MoeMLP, by layer
  using ModelOutput = MoeModelOutputWithPast;
  static torch::nn::AnyModule make_mlp(const Qwen2MoeConfig& config, std::int64_t layer_idx);
  static constexpr bool layers_get_use_cache = true;  // in LlamaDecoderLayer.forward's order
};

using Qwen2MoeRMSNorm = tracetorch::models::RMSNorm<Qwen2Moe>;
using Qwen2MoeRotaryEmbedding = tracetorch::models::RotaryEmbedding<Qwen2Moe>;
using Qwen2MoeMLP = tracetorch::models::GatedMLP<Qwen2Moe>;
using Qwen2MoeAttention = tracetorch::models::Attention<Qwen2Moe>;
using Qwen2MoeDecoderLayer = tracetorch::models::DecoderLayer<Qwen2Moe>;
using Qwen2MoeModel = tracetorch::models::Model<Qwen2Moe>;

/// (router_logits (softmax probabilities, float32), router_scores (top-k weights), router_indices).
using RouterOutput = std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>;

/// Qwen2MoeTopKRouter: softmax over the experts in float32, the top-k, renormalised when
/// norm_topk_prob.
struct Qwen2MoeTopKRouterImpl : torch::nn::Module {
  explicit Qwen2MoeTopKRouterImpl(const Qwen2MoeConfig& config);
  RouterOutput forward(const torch::Tensor& hidden_states);

  std::int64_t top_k, num_experts, hidden_dim;
  bool norm_topk_prob;
  torch::Tensor weight;  // [num_experts, hidden]
};
TRACEABLE(Qwen2MoeTopKRouter);

/// Qwen2MoeExperts (eager): gate_up_proj [E, 2I, H] and down_proj [E, H, I]; a loop over the
/// experts hit, act_fn called once per expert on its tokens.
struct Qwen2MoeExpertsImpl : torch::nn::Module {
  explicit Qwen2MoeExpertsImpl(const Qwen2MoeConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& top_k_index,
                        const torch::Tensor& top_k_weights);

  std::int64_t num_experts, hidden_dim, intermediate_dim;
  torch::Tensor gate_up_proj, down_proj;
  torch::nn::AnyModule act_fn;  // ACT2FN[config.hidden_act]
};
TRACEABLE(Qwen2MoeExperts);

/// Qwen2MoeSparseMoeBlock: shared_expert(x), gate(x), experts(x, indices, weights), then
/// sigmoid(shared_expert_gate(x)) * shared added. gate and experts are Replaceable: built as the
/// class registered for "Qwen2MoeTopKRouter" / "Qwen2MoeExperts" when there is one.
struct Qwen2MoeSparseMoeBlockImpl : torch::nn::Module {
  explicit Qwen2MoeSparseMoeBlockImpl(const Qwen2MoeConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden_states);

  tracetorch::Replaceable<Qwen2MoeTopKRouter> gate{nullptr};
  tracetorch::Replaceable<Qwen2MoeExperts> experts{nullptr};
  Qwen2MoeMLP shared_expert{nullptr};
  tracetorch::nn::Linear shared_expert_gate{nullptr};
};
TRACEABLE(Qwen2MoeSparseMoeBlock);

/// Loads a transformers checkpoint strictly by name (tracetorch::checkpoint::load).
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace qwen2_moe

/// Qwen2MoePreTrainedModel._can_record_outputs: router_logits (each router's output 0),
/// hidden_states (each layer's input), attentions (each attention's output 1), in this order.
template <>
struct tracetorch::models::ModelRecords<qwen2_moe::Qwen2Moe> {
  static constexpr auto value = tracetorch::output_records(
      tracetorch::record<"router_logits", tracetorch::OutputRecorder<qwen2_moe::Qwen2MoeTopKRouter, 0>>(),
      tracetorch::record<"hidden_states", qwen2_moe::Qwen2MoeDecoderLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<qwen2_moe::Qwen2MoeAttention, 1>>());
};

// Compiled once, in qwen2_moe.cpp.
extern template struct tracetorch::models::RMSNormImpl<qwen2_moe::Qwen2Moe>;
extern template struct tracetorch::models::GatedMLPImpl<qwen2_moe::Qwen2Moe>;
extern template struct tracetorch::models::AttentionImpl<qwen2_moe::Qwen2Moe>;
extern template struct tracetorch::models::DecoderLayerImpl<qwen2_moe::Qwen2Moe>;
extern template struct tracetorch::models::ModelImpl<qwen2_moe::Qwen2Moe>;
