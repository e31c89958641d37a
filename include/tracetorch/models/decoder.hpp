#pragma once
/// \file
/// Llama-style attention, decoder layer and model as class templates over a family, the way
/// transformers' modular files derive a model from Llama's classes: a family is a struct deriving
/// from `DecoderFamily<Config>` (Llama's conventions) that names itself and restates only what
/// differs. Qwen3, for example, adds the per-head q_norm/k_norm and passes its layers' keywords in
/// another order:
///
/// \code
/// struct Qwen3 : tracetorch::models::DecoderFamily<Qwen3Config> {
///   static constexpr std::string_view name = "Qwen3";      // Qwen3Model, Qwen3Attention, ...
///   static constexpr bool qk_norm = true;
/// };
/// using Qwen3Model = tracetorch::models::Model<Qwen3>;      // traced as "Qwen3Model"
/// \endcode
///
/// What a family can restate: `name`; `ColwiseLinear`/`RowwiseLinear` with `colwise_linear` and
/// `rowwise_linear` (tensor parallelism, tracetorch/nn/parallel.hpp); `rms_norm` (RMSNormKind::one_plus_weight: Gemma);
/// `qk_norm` (Qwen3); `scale_embeddings` (the embeddings times sqrt(hidden_size), after rotary_emb: Gemma);
/// `cache_only_when_used` (past_key_values in the output only when use_cache: Qwen3);
/// `rotary_position_ids_keyword` (`rotary_emb(h, position_ids=ids)`: Llama in transformers 5.x);
/// `Activation` (a module type, or torch::nn::AnyModule for ACT2FN[config.hidden_act]); the call
/// conventions: `DecoderLayerKeywords` with `layers_get_use_cache` (what the model passes each
/// layer, filled by name; or the family's own `layer_keywords(const LayerCall&)`),
/// `AttentionKeywords` with `attention_keywords(h, layer_keywords)` (what a layer passes its
/// self_attn), `ModelInputs`. A sliding window comes from the config
/// (`sliding_window`, and `layer_types` where the config has them: Mistral, Qwen3). A family may
/// also choose each layer's MLP (`MLP` and `make_mlp(config, layer_idx)`: Qwen2-MoE's sparse
/// blocks beside dense layers), its output struct (`ModelOutput`), its record map (a
/// specialisation of `ModelRecords<Family>`), hand the call's output flags on to every layer
/// and self_attn as upstream's `**kwargs` (`hand_on_output_flags`: transformers 5.x), and replace
/// the decoder layer with its own (a specialisation of `FamilyDecoderLayer<Family>`: Gemma2's four
/// norms). The attention reads `query_pre_attn_scalar` and `attn_logit_softcapping` where the
/// config has them (Gemma2).

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tracetorch/cache.hpp"
#include "tracetorch/capture.hpp"
#include "tracetorch/keywords.hpp"
#include "tracetorch/kwargs.hpp"
#include "tracetorch/models/layers.hpp"

namespace tracetorch::models {

/// A decoder layer's keywords in LlamaDecoderLayer.forward's order (hidden_states positional).
/// `use_cache` is the layer's own default (false) unless a caller passes it.
struct DecoderLayerKeywords {
  Keyword<torch::Tensor> attention_mask;
  Keyword<torch::Tensor> position_ids;
  Keyword<DynamicCache*> past_key_values;
  Keyword<bool> use_cache = defaults_to(false);
  Keyword<torch::Tensor> cache_position;
  Keyword<PositionEmbeddings> position_embeddings;
};
TRACETORCH_KEYWORDS(DecoderLayerKeywords, attention_mask, position_ids, past_key_values, use_cache, cache_position,
                    position_embeddings);

/// What upstream's LlamaDecoderLayer passes its self_attn, all by keyword: hidden_states, then
/// the layer's own keywords in the layer's order (a keyword struct held as a field is recorded as
/// its keywords, in its place).
struct AttentionKeywords {
  Keyword<torch::Tensor> hidden_states;
  DecoderLayerKeywords layer;
};
TRACETORCH_KEYWORDS(AttentionKeywords, hidden_states, layer);

/// The model's keyword inputs (LlamaModel.forward's order); use_cache and the output flags are
/// in tracetorch::OutputOptions. attention_mask: [batch, kv] of 1/0 (padding), or a 4-d mask
/// used as it is.
struct ModelInputs {
  Keyword<torch::Tensor> input_ids;
  Keyword<torch::Tensor> attention_mask;
  Keyword<torch::Tensor> position_ids;
  Keyword<std::shared_ptr<DynamicCache>> past_key_values;
  Keyword<torch::Tensor> inputs_embeds;
  Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(ModelInputs, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds, cache_position);

/// transformers' BaseModelOutputWithPast: absent fields are left out of traces, as a ModelOutput's.
struct BaseModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::shared_ptr<DynamicCache> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, past_key_values, hidden_states, attentions);

/// Everything the model hands its layers: each of the family's DecoderLayerKeywords is filled from
/// the field of its name (detail::layer_keywords_of), or by the family's own layer_keywords.
struct LayerCall {
  torch::Tensor attention_mask;  // the mask of the layer's attention type (full or sliding)
  torch::Tensor position_ids;
  DynamicCache* past_key_values = nullptr;
  bool use_cache = false;
  torch::Tensor cache_position;
  PositionEmbeddings position_embeddings;
};
TRACETORCH_KEYWORDS(LayerCall, attention_mask, position_ids, past_key_values, use_cache, cache_position,
                    position_embeddings);

/// Llama's conventions (modeling_llama.py at 9ee3f431), the defaults a family restates in part.
template <class ConfigType>
struct DecoderFamily {
  using Config = ConfigType;
  using Activation = nn::SiLU;
  using AttentionKeywords = models::AttentionKeywords;
  using DecoderLayerKeywords = models::DecoderLayerKeywords;
  using ModelInputs = models::ModelInputs;
  using ModelOutput = BaseModelOutputWithPast;
  static constexpr RMSNormKind rms_norm = RMSNormKind::weight;
  static constexpr bool qk_norm = false;
  static constexpr bool scale_embeddings = false;
  static constexpr bool cache_only_when_used = false;
  /// The linears a tensor-parallel family shards (transformers' tp_plan "colwise": q/k/v/gate/up,
  /// "rowwise": o/down) and how they are made: plain nn::Linear here; tracetorch/nn/parallel.hpp's
  /// ColwiseLinear and RowwiseLinear in a tensor-parallel family (examples/llama_tp).
  using ColwiseLinear = nn::Linear;
  using RowwiseLinear = nn::Linear;
  static nn::Linear colwise_linear(const Config&, const torch::nn::LinearOptions& options) { return nn::Linear(options); }
  static nn::Linear rowwise_linear(const Config&, const torch::nn::LinearOptions& options) { return nn::Linear(options); }
  static constexpr bool rotary_position_ids_keyword = false;
  /// Whether the model hands the call's output_* flags on to each layer (and the layer to its
  /// self_attn) as `**kwargs`: upstream's capture_outputs reads them with kwargs.get, not pop,
  /// since transformers 5 (Qwen2-MoE and Llama at 0233e509); Llama at 9ee3f431 pops them.
  static constexpr bool hand_on_output_flags = false;

  /// Whether the model passes each layer `use_cache` (Qwen3, Qwen2-MoE, Llama in transformers
  /// 5.x); LlamaModel at 9ee3f431 does not, and the layer keeps its default. The other keywords of
  /// DecoderLayerKeywords are passed from the LayerCall fields of their names, in the struct's order.
  static constexpr bool layers_get_use_cache = false;
  /// LlamaDecoderLayer passes its self_attn its own keywords' values (`x=x` in Python passes the
  /// value whether or not the layer's caller passed it) with the normed hidden states.
  template <class LayerKeywords>
  static AttentionKeywords attention_keywords(const torch::Tensor& hidden_states, const LayerKeywords& kw) {
    return {.hidden_states = hidden_states,
            .layer = {.attention_mask = *kw.attention_mask,
                      .position_ids = *kw.position_ids,
                      .past_key_values = *kw.past_key_values,
                      .use_cache = *kw.use_cache,
                      .cache_position = *kw.cache_position,
                      .position_embeddings = *kw.position_embeddings}};
  }
};

/// Llama's attention: q/k/v/o projections (bias from config.attention_bias; for q/k/v from
/// config.qkv_bias where the config has one), with
/// `Family::qk_norm` an RMSNorm over each head of q and k before the rotation (Qwen3), the
/// cache updated, then eager attention. Returns (attn_output, attn_weights). `kwargs` is
/// upstream's `**kwargs`: recorded by a trace, otherwise unused.
template <class Family>
struct AttentionImpl : torch::nn::Module {
  AttentionImpl(const typename Family::Config& config, std::int64_t layer_idx);
  std::tuple<torch::Tensor, torch::Tensor> forward(const typename Family::AttentionKeywords& kw, const Kwargs& kwargs = {});

  std::int64_t head_dim, num_heads, num_key_value_heads, num_key_value_groups, layer_idx;
  double scaling, attention_dropout;  // scaling: query_pre_attn_scalar ** -0.5 where the config has it (Gemma2)
  std::optional<std::int64_t> sliding_window;  // the layer's window; the mask applies it
  std::optional<double> softcap;               // config.attn_logit_softcapping (Gemma2), none otherwise
  typename Family::ColwiseLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  typename Family::RowwiseLinear o_proj{nullptr};
  RMSNorm<Family> q_norm{nullptr}, k_norm{nullptr};  // registered only when Family::qk_norm
};
template <class Family>
using Attention = FamilyHolder<AttentionImpl<Family>, Family, "Attention">;

}  // namespace tracetorch::models

namespace tracetorch::detail {
/// The layer's keywords that an attention's keywords hand on: their `layer` field, or the
/// keywords themselves where a family declares them flat (hidden_states beside the rest).
template <class Keywords>
const auto& layer_keywords_in(const Keywords& kw) {
  if constexpr (requires { kw.layer; }) {
    return kw.layer;
  } else {
    return kw;
  }
}

/// What the model passes each layer: the family's own `layer_keywords(call)` where it has one, else
/// each keyword of `Family::DecoderLayerKeywords` from the LayerCall field of the same name
/// (`use_cache` only where `Family::layers_get_use_cache`); a keyword LayerCall lacks stays unpassed.
template <class Family>
typename Family::DecoderLayerKeywords layer_keywords_of(const models::LayerCall& call) {
  if constexpr (requires { Family::layer_keywords(call); }) {
    return Family::layer_keywords(call);
  } else {
    typename Family::DecoderLayerKeywords keywords;
    tracetorch_keywords(keywords, [&](std::string_view name, auto& field) {
      if (name == "use_cache" && !Family::layers_get_use_cache) return;
      tracetorch_keywords(call, [&](std::string_view field_of_call, const auto& value) {
        if constexpr (std::is_assignable_v<decltype(field), decltype(value)>) {
          if (field_of_call == name) field = value;
        }
      });
    });
    return keywords;
  }
}

/// The family's MLP class: `Family::MLP` (a holder, or torch::nn::AnyModule when layers differ),
/// else the gated MLP.
template <class Family>
struct family_mlp {
  using type = models::GatedMLP<Family>;
};
template <class Family>
  requires requires { typename Family::MLP; }
struct family_mlp<Family> {
  using type = typename Family::MLP;
};
}  // namespace tracetorch::detail

namespace tracetorch::models {

/// Pre-norm decoder layer: h + self_attn(input_layernorm(h)), then + mlp(post_attention_layernorm(.)).
/// The mlp is `Family::make_mlp(config, layer_idx)` where the family has one, else GatedMLP; the
/// layer's `kwargs` (upstream's `**kwargs`) are handed on to self_attn.
template <class Family>
struct DecoderLayerImpl : torch::nn::Module {
  using MLP = typename detail::family_mlp<Family>::type;
  DecoderLayerImpl(const typename Family::Config& config, std::int64_t layer_idx);
  torch::Tensor forward(const torch::Tensor& hidden_states, const typename Family::DecoderLayerKeywords& kw = {},
                        const Kwargs& kwargs = {});

  Attention<Family> self_attn{nullptr};
  MLP mlp = [] {  // empty until the constructor makes it, as a holder{nullptr}
    if constexpr (std::is_same_v<MLP, torch::nn::AnyModule>) {
      return MLP();
    } else {
      return MLP(nullptr);
    }
  }();
  RMSNorm<Family> input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
template <class Family>
using DecoderLayer = FamilyHolder<DecoderLayerImpl<Family>, Family, "DecoderLayer">;

/// For a config's validate hook, after it derives `layer_types` where the file left them out
/// (Qwen3, Gemma2): one entry per layer, each "full_attention" or "sliding_attention", a sliding
/// one only with `sliding_window` > 0; else tracetorch::Error "<where>: <what>".
template <class Config>
void check_layer_types(const Config& c, const std::string& where) {
  const auto fail = [&](const std::string& why) { throw Error(where + ": " + why); };
  if (static_cast<std::int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    fail("layer_types must have one entry per layer (" + std::to_string(c.layer_types.size()) + " for " +
         std::to_string(c.num_hidden_layers) + " layers; an empty list derives them)");
  }
  const auto window = detail::optional_of<std::int64_t>(c.sliding_window);
  for (const auto& type : c.layer_types) {
    if (type != "full_attention" && type != "sliding_attention") fail("layer_types: unknown type \"" + type + "\"");
    if (type == "sliding_attention" && !(window && *window > 0)) fail("a sliding layer needs sliding_window > 0");
  }
}

/// The decoder layer a family's model is made of: DecoderLayer<Family>, unless the family
/// specialises this after its own layer class, as transformers' modular files redefine a layer
/// (Gemma2's four norms). That layer is built as `Layer(config, layer_idx)` and called as
/// `layer(hidden_states, Family::DecoderLayerKeywords)`, with the handed-on `**kwargs` as a third
/// argument where its forward takes one; it is the default record map's "hidden_states".
template <class Family>
struct FamilyDecoderLayer {
  using type = DecoderLayer<Family>;
};
template <class Family>
using family_decoder_layer_t = typename FamilyDecoderLayer<Family>::type;

/// A family's record map (transformers' `_can_record_outputs`): by default each layer's input
/// (hidden_states) and each attention's weights (its output 1). A family with others specialises
/// it after its classes (Qwen2-MoE adds router_logits, its router's output 0).
template <class Family>
struct ModelRecords {
  static constexpr auto value =
      output_records(record<"hidden_states", family_decoder_layer_t<Family>>(), record<"attentions", OutputRecorder<Attention<Family>, 1>>());
};

/// The base model: embed_tokens, layers, norm, rotary_emb. forward({.input_ids = ids}) as
/// Python's model(input_ids=ids): a DynamicCache when use_cache (the call's, else the config's),
/// cache_position and position_ids from the cache's length, the causal mask (with a 2-d padding
/// attention_mask, and a sliding one for sliding layers), one rotary embedding for all layers.
template <class Family>
struct ModelImpl : torch::nn::Module {
  using Output = typename Family::ModelOutput;
  /// transformers' _can_record_outputs: ModelRecords<Family>.
  static constexpr auto can_record_outputs = ModelRecords<Family>::value;

  explicit ModelImpl(const typename Family::Config& config);
  Output forward(const typename Family::ModelInputs& inputs, const OutputOptions& options = {});

  typename Family::Config config;
  nn::Embedding embed_tokens{nullptr};
  nn::ModuleList layers{nullptr};
  RMSNorm<Family> norm{nullptr};
  RotaryEmbedding<Family> rotary_emb{nullptr};

 private:
  Output run_layers(const typename Family::ModelInputs& inputs, bool use_cache, const Kwargs& handed_on);
  std::vector<std::optional<std::int64_t>> layer_windows_;  // each layer's sliding window, if any
};
template <class Family>
using Model = FamilyHolder<ModelImpl<Family>, Family, "Model">;

TRACETORCH_DETAIL_FAMILY_PART_MARKER(Attention)
TRACETORCH_DETAIL_FAMILY_PART_MARKER(DecoderLayer)
TRACETORCH_DETAIL_FAMILY_PART_MARKER(Model)

// The member functions, out of class: a port's header can declare `extern template struct
// ModelImpl<Family>;` and compile them once, in its own source file.

template <class Family>
AttentionImpl<Family>::AttentionImpl(const typename Family::Config& c, std::int64_t layer_idx_)
    : head_dim(detail::head_dim_of(c)),
      num_heads(c.num_attention_heads),
      num_key_value_heads(c.num_key_value_heads),
      num_key_value_groups(c.num_attention_heads / c.num_key_value_heads),
      layer_idx(layer_idx_),
      scaling(detail::attention_scaling_of(c)),
      attention_dropout(detail::attention_dropout_of(c)),
      sliding_window(detail::sliding_window_of(c, layer_idx_)),
      softcap(detail::attn_logit_softcapping_of(c)) {
  using torch::nn::LinearOptions;
  const bool bias = detail::qkv_bias_of(c);
  const auto q_out = num_heads * head_dim, kv_out = num_key_value_heads * head_dim;
  q_proj = register_module("q_proj", Family::colwise_linear(c, LinearOptions(c.hidden_size, q_out).bias(bias)));
  k_proj = register_module("k_proj", Family::colwise_linear(c, LinearOptions(c.hidden_size, kv_out).bias(bias)));
  v_proj = register_module("v_proj", Family::colwise_linear(c, LinearOptions(c.hidden_size, kv_out).bias(bias)));
  o_proj = register_module("o_proj", Family::rowwise_linear(c, LinearOptions(q_out, c.hidden_size).bias(detail::attention_bias_of(c))));
  if constexpr (Family::qk_norm) {
    q_norm = register_module("q_norm", RMSNorm<Family>(head_dim, c.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm<Family>(head_dim, c.rms_norm_eps));
  }
}

template <class Family>
std::tuple<torch::Tensor, torch::Tensor> AttentionImpl<Family>::forward(const typename Family::AttentionKeywords& kw,
                                                                        const Kwargs& /*kwargs*/) {
  const auto& hidden_states = *kw.hidden_states;
  const auto& layer = detail::layer_keywords_in(kw);
  auto shape = hidden_states.sizes().vec();  // (*input_shape, -1, head_dim)
  shape.back() = -1;
  shape.push_back(head_dim);
  // Each norm right after its projection (q_proj, q_norm, k_proj, k_norm), as upstream calls them.
  auto query = q_proj(hidden_states).view(shape);
  if constexpr (Family::qk_norm) query = q_norm(query);
  auto key = k_proj(hidden_states).view(shape);
  if constexpr (Family::qk_norm) key = k_norm(key);
  auto value = v_proj(hidden_states).view(shape).transpose(1, 2);
  const auto& [cos, sin] = *layer.position_embeddings;
  std::tie(query, key) = apply_rotary_pos_emb(query.transpose(1, 2), key.transpose(1, 2), cos, sin);
  if (DynamicCache* cache = layer.past_key_values.value_or(nullptr)) std::tie(key, value) = cache->update(key, value, layer_idx);
  auto [output, weights] = eager_attention_forward(query, key, value, *layer.attention_mask, scaling,
                                                   is_training() ? attention_dropout : 0.0, is_training(), softcap);
  shape.pop_back();
  return {o_proj(output.reshape(shape).contiguous()), weights};
}

template <class Family>
DecoderLayerImpl<Family>::DecoderLayerImpl(const typename Family::Config& c, std::int64_t layer_idx) {
  self_attn = register_module("self_attn", Attention<Family>(c, layer_idx));
  if constexpr (requires { Family::make_mlp(c, layer_idx); }) {
    mlp = Family::make_mlp(c, layer_idx);
  } else {
    mlp = MLP(c);
  }
  register_module("mlp", mlp.ptr());
  input_layernorm = register_module("input_layernorm", RMSNorm<Family>(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm<Family>(c.hidden_size, c.rms_norm_eps));
}

template <class Family>
torch::Tensor DecoderLayerImpl<Family>::forward(const torch::Tensor& hidden_states,
                                                const typename Family::DecoderLayerKeywords& kw, const Kwargs& kwargs) {
  auto residual = hidden_states;
  auto h = std::get<0>(self_attn(Family::attention_keywords(input_layernorm(hidden_states), kw), kwargs));
  h = residual + h;
  residual = h;
  if constexpr (std::is_same_v<MLP, torch::nn::AnyModule>) {
    return residual + mlp.template forward<torch::Tensor>(post_attention_layernorm(h));
  } else {
    return residual + mlp(post_attention_layernorm(h));
  }
}

template <class Family>
ModelImpl<Family>::ModelImpl(const typename Family::Config& config_) : config(config_) {
  if constexpr (requires { config.validate(std::string()); }) config.validate(std::string(Family::name) + "Config");
  const auto& c = config;  // the parts are built from the validated copy: a hook may derive fields (layer_types)
  auto embedding = torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size);
  if (const auto pad = detail::pad_token_id_of(c)) embedding.padding_idx(*pad);
  embed_tokens = register_module("embed_tokens", nn::Embedding(embedding));
  layers = register_module("layers", nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers->push_back(family_decoder_layer_t<Family>(c, i));
    layer_windows_.push_back(detail::sliding_window_of(c, i));
  }
  norm = register_module("norm", RMSNorm<Family>(c.hidden_size, c.rms_norm_eps));
  rotary_emb = register_module("rotary_emb", RotaryEmbedding<Family>(c));
}

}  // namespace tracetorch::models

namespace tracetorch::models {

template <class Family>
typename ModelImpl<Family>::Output ModelImpl<Family>::forward(const typename Family::ModelInputs& inputs,
                                                              const OutputOptions& options) {
  const auto given = [](const Keyword<torch::Tensor>& k) { return k.has_value() && k->defined(); };
  const std::string model(std::string(Family::name) + "Model");
  if (given(inputs.input_ids) == given(inputs.inputs_embeds)) {
    throw Error(model + ": give exactly one of input_ids and inputs_embeds");
  }
  if (given(inputs.input_ids) && inputs.input_ids->dim() != 2) {
    throw Error(model + ": input_ids must be [batch, seq], got " + std::to_string(inputs.input_ids->dim()) + " dimensions");
  }
  const bool use_cache = options.use_cache.value_or(config.use_cache);
  // The model's signature takes use_cache: only the output flags stay in its **kwargs.
  const Kwargs handed_on = Family::hand_on_output_flags ? options_as_kwargs(options, /*with_use_cache=*/false) : Kwargs{};
  return capture_outputs(*this, merge_with_config_defaults(*this, options),
                         [&] { return run_layers(inputs, use_cache, handed_on); });
}

template <class Family>
typename ModelImpl<Family>::Output ModelImpl<Family>::run_layers(const typename Family::ModelInputs& inputs, bool use_cache,
                                                                 const Kwargs& handed_on) {
  const auto given = [](const Keyword<torch::Tensor>& k) { return k.has_value() && k->defined(); };
  auto hidden_states = given(inputs.inputs_embeds) ? *inputs.inputs_embeds : embed_tokens(*inputs.input_ids);
  std::shared_ptr<DynamicCache> cache = inputs.past_key_values.value_or(nullptr);
  if (use_cache && !cache) cache = std::make_shared<DynamicCache>(layer_windows_);  // DynamicCache(config=...)
  const auto past_seen = cache ? cache->get_seq_length() : 0;
  auto cache_position = *inputs.cache_position;
  if (!given(inputs.cache_position)) {
    cache_position = torch::arange(past_seen, past_seen + hidden_states.size(1),
                                   torch::TensorOptions(torch::kInt64).device(hidden_states.device()));
  }
  const auto position_ids = given(inputs.position_ids) ? *inputs.position_ids : cache_position.unsqueeze(0);
  // The mask's keys are those layer i's cache holds before this step, and this step's (upstream's
  // get_mask_sizes): all of them for a full layer; a sliding layer's kept window - 1 at most.
  const auto batch = hidden_states.size(0), query_length = cache_position.size(0);
  const auto mask_for = [&](std::size_t layer_idx, std::optional<std::int64_t> window) {
    const auto [kv_length, kv_offset] = cache ? cache->get_mask_sizes(query_length, static_cast<std::int64_t>(layer_idx))
                                              : std::pair<std::int64_t, std::int64_t>{query_length, 0};
    return create_causal_mask(cache_position, batch, kv_length, kv_offset, *inputs.attention_mask, window, hidden_states.options());
  };
  torch::Tensor full_mask;
  std::optional<std::int64_t> built_window;
  torch::Tensor sliding_mask;
  LayerCall call{.position_ids = position_ids, .past_key_values = cache.get(), .use_cache = use_cache,
                 .cache_position = cache_position};
  if constexpr (rotary_position_ids_keyword<Family>) {  // rotary_emb(hidden_states, position_ids=position_ids)
    call.position_embeddings = rotary_emb(hidden_states, RotaryKeywords{.position_ids = position_ids});
  } else {
    call.position_embeddings = rotary_emb(hidden_states, position_ids);
  }
  if constexpr (Family::scale_embeddings) {  // after rotary_emb, which records the unscaled embeddings, as upstream (Gemma)
    // A 0-d tensor of the hidden dtype: in bfloat16, sqrt(3072) = 55.4256 becomes 55.5, as upstream's.
    hidden_states = hidden_states * torch::tensor(std::pow(static_cast<double>(config.hidden_size), 0.5), hidden_states.scalar_type());
  }
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto window = layer_windows_[i];
    if (window && window != built_window) sliding_mask = mask_for(i, built_window = window);
    if (!window && !full_mask.defined()) full_mask = mask_for(i, std::nullopt);
    call.attention_mask = window ? sliding_mask : full_mask;
    // Through the holder type, so the call is traced (as<DecoderLayerImpl> would not be).
    using Layer = family_decoder_layer_t<Family>;
    auto layer = (*layers)[i]->as<Layer>();
    if constexpr (requires { layer->forward(hidden_states, detail::layer_keywords_of<Family>(call), handed_on); }) {
      hidden_states = layer->forward(hidden_states, detail::layer_keywords_of<Family>(call), handed_on);
    } else {
      hidden_states = layer->forward(hidden_states, detail::layer_keywords_of<Family>(call));
    }
  }
  const bool keep_cache = use_cache || !Family::cache_only_when_used;
  Output output;
  output.last_hidden_state = norm(hidden_states);
  output.past_key_values = keep_cache ? cache : nullptr;
  return output;
}

}  // namespace tracetorch::models
