#pragma once
// A small BERT-style decoder with cross-attention, in transformers' module names
// (embeddings, layer.N.{attention, crossattention}.{self, output}, layer.N.{intermediate, output}):
// the self-attention and the cross-attention are the same class, BertAttention, told apart in
// the record map by layer_name, as in transformers' BERT.

#include <tracetorch/capture.hpp>
#include <tracetorch/error.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace bert {

struct BertConfig {
  std::int64_t vocab_size = 99;
  std::int64_t hidden_size = 32;
  std::int64_t num_hidden_layers = 2;
  std::int64_t num_attention_heads = 4;
  std::int64_t intermediate_size = 37;
  std::int64_t max_position_embeddings = 64;
  double layer_norm_eps = 1e-12;
  bool output_hidden_states = false;
  bool output_attentions = false;
};

struct BertEmbeddingsImpl : torch::nn::Module {
  explicit BertEmbeddingsImpl(const BertConfig& config) {
    word_embeddings = register_module("word_embeddings", tracetorch::nn::Embedding(config.vocab_size, config.hidden_size));
    position_embeddings =
        register_module("position_embeddings", tracetorch::nn::Embedding(config.max_position_embeddings, config.hidden_size));
    LayerNorm = register_module(
        "LayerNorm",
        tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps)));
  }
  /// From ids, or from ready-made embeddings (transformers' inputs_embeds) when `ids` is undefined.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& inputs_embeds) {
    const auto words = input_ids.defined() ? word_embeddings(input_ids) : inputs_embeds;
    const auto positions = torch::arange(words.size(1), torch::TensorOptions().dtype(torch::kInt64));
    return LayerNorm(words + position_embeddings(positions).unsqueeze(0));
  }
  tracetorch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr};
  tracetorch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: transformers' name
};
TRACEABLE(BertEmbeddings);

/// Multi-head attention; keys and values come from `context` (the encoder's states for
/// cross-attention, the hidden states themselves for self-attention).
struct BertSelfAttentionImpl : torch::nn::Module {
  explicit BertSelfAttentionImpl(const BertConfig& config)
      : num_heads(config.num_attention_heads), head_dim(config.hidden_size / config.num_attention_heads) {
    query = register_module("query", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
    key = register_module("key", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
    value = register_module("value", tracetorch::nn::Linear(config.hidden_size, config.hidden_size));
  }
  /// (context [batch, seq, hidden], attention probabilities [batch, heads, seq, context_seq]).
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states, const torch::Tensor& context) {
    const auto split = [&](const torch::Tensor& x) {
      return x.view({x.size(0), x.size(1), num_heads, head_dim}).transpose(1, 2);
    };
    const auto q = split(query(hidden_states));
    const auto k = split(key(context));
    const auto v = split(value(context));
    const auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(head_dim)), -1);
    auto out = torch::matmul(probs, v).transpose(1, 2).reshape({hidden_states.size(0), hidden_states.size(1), -1});
    return {out, probs};
  }
  std::int64_t num_heads, head_dim;
  tracetorch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
};
TRACEABLE(BertSelfAttention);

struct BertSelfOutputImpl : torch::nn::Module {
  explicit BertSelfOutputImpl(const BertConfig& config, std::int64_t in_features) {
    dense = register_module("dense", tracetorch::nn::Linear(in_features, config.hidden_size));
    LayerNorm = register_module(
        "LayerNorm",
        tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps)));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& residual) {
    return LayerNorm(dense(hidden_states) + residual);
  }
  tracetorch::nn::Linear dense{nullptr};
  tracetorch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: transformers' name
};
TRACEABLE(BertSelfOutput);

struct BertAttentionImpl : torch::nn::Module {
  explicit BertAttentionImpl(const BertConfig& config) {
    self = register_module("self", BertSelfAttention(config));
    output = register_module("output", BertSelfOutput(config, config.hidden_size));
  }
  /// Self-attention when `context` is undefined; cross-attention over `context` otherwise.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states, const torch::Tensor& context) {
    auto [attended, probs] = self->forward(hidden_states, context.defined() ? context : hidden_states);
    return {output(attended, hidden_states), probs};
  }
  BertSelfAttention self{nullptr};
  BertSelfOutput output{nullptr};
};
TRACEABLE(BertAttention);

struct BertIntermediateImpl : torch::nn::Module {
  explicit BertIntermediateImpl(const BertConfig& config) {
    dense = register_module("dense", tracetorch::nn::Linear(config.hidden_size, config.intermediate_size));
    intermediate_act_fn = register_module("intermediate_act_fn", tracetorch::nn::GELU());
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) { return intermediate_act_fn(dense(hidden_states)); }
  tracetorch::nn::Linear dense{nullptr};
  tracetorch::nn::GELU intermediate_act_fn{nullptr};
};
TRACEABLE(BertIntermediate);

struct BertLayerImpl : torch::nn::Module {
  explicit BertLayerImpl(const BertConfig& config) {
    attention = register_module("attention", BertAttention(config));
    crossattention = register_module("crossattention", BertAttention(config));
    intermediate = register_module("intermediate", BertIntermediate(config));
    output = register_module("output", BertSelfOutput(config, config.intermediate_size));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states, const torch::Tensor& encoder_hidden_states) {
    auto attended = std::get<0>(attention->forward(hidden_states, torch::Tensor()));
    if (encoder_hidden_states.defined()) attended = std::get<0>(crossattention->forward(attended, encoder_hidden_states));
    return output(intermediate(attended), attended);
  }
  BertAttention attention{nullptr}, crossattention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertSelfOutput output{nullptr};
};
TRACEABLE(BertLayer);

/// transformers' BaseModelOutputWithPastAndCrossAttentions, without the cache.
struct BaseModelOutputWithCrossAttentions {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> cross_attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithCrossAttentions, last_hidden_state, hidden_states, attentions, cross_attentions);

struct BertDecoderModelImpl : torch::nn::Module {
  /// As transformers' BERT: one attention class, self- and cross-attention told apart by the
  /// attribute name on the path (`layer.0.attention.self` vs `layer.0.crossattention.self`).
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", BertLayer>(),
      tracetorch::record<"attentions", tracetorch::OutputRecorder<BertSelfAttention, 1, ".attention.">>(),
      tracetorch::record<"cross_attentions", tracetorch::OutputRecorder<BertSelfAttention, 1, ".crossattention.">>());

  explicit BertDecoderModelImpl(const BertConfig& config) : config(config) {
    embeddings = register_module("embeddings", BertEmbeddings(config));
    layer = register_module("layer", tracetorch::nn::ModuleList());
    for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) layer->push_back(BertLayer(config));
  }

  /// `input_ids` [batch, seq] (or undefined, with `inputs_embeds` [batch, seq, hidden]);
  /// `encoder_hidden_states` [batch, source_seq, hidden] or undefined (no cross-attention).
  BaseModelOutputWithCrossAttentions forward(const torch::Tensor& input_ids, const torch::Tensor& encoder_hidden_states,
                                             const tracetorch::OutputOptions& options = {},
                                             const torch::Tensor& inputs_embeds = {}) {
    if (input_ids.defined() == inputs_embeds.defined()) {
      throw tracetorch::Error("bert: give exactly one of input_ids and inputs_embeds");
    }
    return tracetorch::capture_outputs(*this, options, [&] {
      auto hidden_states = embeddings(input_ids, inputs_embeds);
      for (const auto& block : *layer) hidden_states = block->as<BertLayer>()->forward(hidden_states, encoder_hidden_states);
      return BaseModelOutputWithCrossAttentions{.last_hidden_state = hidden_states};
    });
  }

  /// transformers' get_input_embeddings(): what turns input_ids into inputs_embeds.
  tracetorch::nn::Embedding get_input_embeddings() const { return embeddings->word_embeddings; }

  BertConfig config;
  BertEmbeddings embeddings{nullptr};
  tracetorch::nn::ModuleList layer{nullptr};
};
TRACEABLE(BertDecoderModel);

}  // namespace bert
