// The Gemma port: each forward as upstream's eager GemmaModel computes it, operation for operation
// (the printed trace shows four significant digits, so the order of operations shows too).
#include "gemma.hpp"

#include <tracetorch/config_file.hpp>
#include <tracetorch/models/functional.hpp>  // the rotary kernels and eager attention Gemma shares with Llama

#include <cmath>
#include <limits>

namespace gemma {
namespace {

using torch::indexing::None;
using torch::indexing::Slice;

/// torch.finfo(dtype).min for the floating dtypes a mask can have.
double finfo_min(c10::ScalarType dtype) {
  double minimum = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, dtype, "finfo_min",
                                  [&] { minimum = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  return minimum;
}

bool given(const tracetorch::Keyword<torch::Tensor>& keyword) { return keyword.has_value() && keyword->defined(); }

}  // namespace

GemmaConfig GemmaConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  return tracetorch::load_config<GemmaConfig>(path, report);
}

void GemmaConfig::validate(const std::string& where) const {
  const std::string at = "gemma: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  if (!rope_scaling.is_null()) {
    throw tracetorch::Error("tracetorch: " + where + ": \"rope_scaling\" must be null: only the default rope is ported");
  }
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, rope_theta);
  tracetorch::check_not_negative(*this, at, num_hidden_layers);
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if (head_dim % 2 != 0) fail("head_dim must be even for rotary embeddings");
  if (!(attention_dropout >= 0 && attention_dropout <= 1)) fail("attention_dropout must be in [0, 1]");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

GemmaRMSNormImpl::GemmaRMSNormImpl(std::int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::zeros({dim}));
}

torch::Tensor GemmaRMSNormImpl::forward(const torch::Tensor& x) {
  // In float32 whatever x's dtype, scaled before the cast back: Gemma's (x * w).to(dtype).
  const auto widened = x.to(torch::kFloat32);
  const auto normed = widened * torch::rsqrt(widened.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * (1.0 + weight.to(torch::kFloat32))).type_as(x);
}

GemmaMLPImpl::GemmaMLPImpl(const GemmaConfig& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  up_proj = register_module("up_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  down_proj = register_module("down_proj", tracetorch::nn::Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(false)));
  act_fn = tracetorch::nn::register_activation(*this, "act_fn", c.hidden_act);
}

torch::Tensor GemmaMLPImpl::forward(const torch::Tensor& x) {
  // gate before up, as Python evaluates the expression: the trace lists the calls in that order.
  const auto gate = act_fn.forward(gate_proj(x));
  return down_proj(gate * up_proj(x));
}

GemmaRotaryEmbeddingImpl::GemmaRotaryEmbeddingImpl(const GemmaConfig& c) {
  auto [frequencies, scaling] = tracetorch::models::rope_inv_freq(c.rope_theta, c.head_dim);
  inv_freq = register_buffer("inv_freq", frequencies, {.persistent = false});
  attention_scaling = scaling;
}

PositionEmbeddings GemmaRotaryEmbeddingImpl::forward(const torch::Tensor& x, const torch::Tensor& position_ids) {
  return tracetorch::models::rotary_cos_sin(inv_freq, attention_scaling, x, position_ids);
}

GemmaAttentionImpl::GemmaAttentionImpl(const GemmaConfig& c, std::int64_t layer_idx_)
    : head_dim(c.head_dim),
      num_key_value_groups(c.num_attention_heads / c.num_key_value_heads),
      layer_idx(layer_idx_),
      scaling(std::pow(static_cast<double>(c.head_dim), -0.5)),
      attention_dropout(c.attention_dropout) {
  using torch::nn::LinearOptions;
  const auto q_out = c.num_attention_heads * head_dim, kv_out = c.num_key_value_heads * head_dim;
  q_proj = register_module("q_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, q_out).bias(c.attention_bias)));
  k_proj = register_module("k_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, kv_out).bias(c.attention_bias)));
  v_proj = register_module("v_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, kv_out).bias(c.attention_bias)));
  o_proj = register_module("o_proj", tracetorch::nn::Linear(LinearOptions(q_out, c.hidden_size).bias(c.attention_bias)));
}

std::tuple<torch::Tensor, torch::Tensor> GemmaAttentionImpl::forward(const GemmaAttentionKeywords& kw) {
  const auto& hidden_states = *kw.hidden_states;
  const auto batch = hidden_states.size(0), length = hidden_states.size(1);
  const std::vector<std::int64_t> hidden_shape{batch, length, -1, head_dim};
  auto query = q_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto key = k_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto value = v_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  const auto& [cos, sin] = *kw.layer.position_embeddings;
  std::tie(query, key) = tracetorch::models::apply_rotary_pos_emb(query, key, cos, sin);
  if (DynamicCache* cache = kw.layer.past_key_value.value_or(nullptr)) {
    std::tie(key, value) = cache->update(key, value, layer_idx);
  }
  // Upstream's eager_attention_forward: the key/value heads repeated num_key_value_groups times.
  auto [output, weights] = tracetorch::models::eager_attention_forward(
      query, key, value, given(kw.layer.attention_mask) ? *kw.layer.attention_mask : torch::Tensor(), scaling,
      is_training() ? attention_dropout : 0.0, is_training());
  return {o_proj(output.reshape({batch, length, -1}).contiguous()), weights};
}

GemmaDecoderLayerImpl::GemmaDecoderLayerImpl(const GemmaConfig& c, std::int64_t layer_idx) {
  self_attn = register_module("self_attn", GemmaAttention(c, layer_idx));
  mlp = register_module("mlp", GemmaMLP(c));
  input_layernorm = register_module("input_layernorm", GemmaRMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", GemmaRMSNorm(c.hidden_size, c.rms_norm_eps));
}

GemmaDecoderLayerOutput GemmaDecoderLayerImpl::forward(const torch::Tensor& hidden_states, const GemmaDecoderLayerKeywords& kw) {
  auto residual = hidden_states;
  // `x=x` in Python passes x whether or not the layer's caller did: pass_each.
  auto [attn_output, attn_weights] =
      self_attn({.hidden_states = input_layernorm(hidden_states), .layer = tracetorch::pass_each(kw)});
  auto h = residual + attn_output;
  residual = h;
  h = residual + mlp(post_attention_layernorm(h));
  if (*kw.output_attentions) return {h, attn_weights};
  return {h};
}

GemmaModelImpl::GemmaModelImpl(const GemmaConfig& c) : config(c) {
  config.validate("GemmaConfig");
  auto embedding = torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size);
  if (c.pad_token_id) embedding.padding_idx(*c.pad_token_id);
  embed_tokens = register_module("embed_tokens", tracetorch::nn::Embedding(embedding));
  layers = register_module("layers", tracetorch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(GemmaDecoderLayer(c, i));
  norm = register_module("norm", GemmaRMSNorm(c.hidden_size, c.rms_norm_eps));
  rotary_emb = register_module("rotary_emb", GemmaRotaryEmbedding(c));
}

BaseModelOutputWithPast GemmaModelImpl::forward(const GemmaModelInputs& inputs) {
  if (given(inputs.input_ids) == given(inputs.inputs_embeds)) {
    throw tracetorch::Error("gemma: give exactly one of input_ids and inputs_embeds");
  }
  if (given(inputs.input_ids)) {
    const auto& ids = *inputs.input_ids;
    if (ids.dim() != 2 || ids.scalar_type() != torch::kInt64) throw tracetorch::Error("gemma: input_ids must be int64 [batch, seq]");
    if (ids.numel() > 0 && (ids.min().item<std::int64_t>() < 0 || ids.max().item<std::int64_t>() >= config.vocab_size)) {
      throw tracetorch::Error("gemma: input_ids must lie in [0, vocab_size = " + std::to_string(config.vocab_size) + ")");
    }
  }
  const bool use_cache = inputs.use_cache.value_or(config.use_cache);
  const bool output_attentions = inputs.output_attentions.value_or(config.output_attentions);
  // Upstream's flags are keywords of this forward; capture reads them from an OutputOptions.
  const tracetorch::OutputOptions options{
      .output_hidden_states = inputs.output_hidden_states.value_or(config.output_hidden_states),
      .output_attentions = output_attentions,
      .use_cache = use_cache};
  return tracetorch::capture_outputs(*this, options, [&] { return run_layers(inputs, use_cache, output_attentions); });
}

torch::Tensor update_causal_mask(const torch::Tensor& attention_mask, const torch::Tensor& input_tensor,
                                 const torch::Tensor& cache_position, std::int64_t past_seen_tokens) {
  if (attention_mask.defined() && attention_mask.dim() == 4) return attention_mask;  // already inverted
  const auto dtype = input_tensor.scalar_type();
  const auto batch = input_tensor.size(0), sequence_length = input_tensor.size(1);
  const auto target_length = attention_mask.defined() ? attention_mask.size(-1) : past_seen_tokens + sequence_length + 1;
  const double minimum = finfo_min(dtype);
  auto mask = torch::full({sequence_length, target_length}, minimum, input_tensor.options());
  if (sequence_length != 1) mask = torch::triu(mask, 1);
  mask.mul_(torch::arange(target_length, cache_position.options()) > cache_position.reshape({-1, 1}));
  mask = mask.index({None, None}).expand({batch, 1, -1, -1});
  if (attention_mask.defined()) {
    mask = mask.clone();  // contiguous, for the in-place fill
    const auto mask_length = attention_mask.size(-1);
    auto head = mask.slice(3, 0, mask_length);
    const auto padding = (head + attention_mask.index({Slice(), None, None, Slice()})) == 0;
    head.copy_(head.masked_fill(padding, minimum));
  }
  return mask;
}

BaseModelOutputWithPast GemmaModelImpl::run_layers(const GemmaModelInputs& inputs, bool use_cache, bool output_attentions) {
  const auto inputs_embeds = given(inputs.inputs_embeds) ? *inputs.inputs_embeds : embed_tokens(*inputs.input_ids);
  std::shared_ptr<DynamicCache> cache = inputs.past_key_values.value_or(nullptr);
  if (use_cache && !cache) cache = std::make_shared<DynamicCache>();  // upstream's DynamicCache()
  const auto past_seen = cache ? cache->get_seq_length() : 0;
  auto cache_position = *inputs.cache_position;
  if (!cache_position.defined()) {
    cache_position = torch::arange(past_seen, past_seen + inputs_embeds.size(1), torch::TensorOptions(torch::kInt64).device(inputs_embeds.device()));
  }
  const auto position_ids = given(inputs.position_ids) ? *inputs.position_ids : cache_position.unsqueeze(0);
  const auto causal_mask = update_causal_mask(*inputs.attention_mask, inputs_embeds, cache_position, past_seen);
  const auto position_embeddings = rotary_emb(inputs_embeds, position_ids);
  // A 0-d tensor of the hidden dtype, as upstream: in bf16, sqrt(3072) = 55.4256 becomes 55.5.
  const auto normalizer = torch::tensor(std::pow(static_cast<double>(config.hidden_size), 0.5), inputs_embeds.scalar_type());
  auto hidden_states = inputs_embeds * normalizer;
  for (const auto& layer : *layers) {
    // Through the holder type, so the call is traced. past_key_value=None without a cache.
    hidden_states = layer->as<GemmaDecoderLayer>()->forward(hidden_states, {.attention_mask = causal_mask,
                                                                            .position_ids = position_ids,
                                                                            .past_key_value = cache.get(),
                                                                            .output_attentions = output_attentions,
                                                                            .use_cache = use_cache,
                                                                            .cache_position = cache_position,
                                                                            .position_embeddings = position_embeddings})[0];
  }
  return {.last_hidden_state = norm(hidden_states), .past_key_values = use_cache ? cache : nullptr};
}

tracetorch::checkpoint::Report load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights,
                                               tracetorch::checkpoint::DtypePolicy dtype) {
  return tracetorch::checkpoint::load(model, weights, {.dtype = dtype});
}

}  // namespace gemma
