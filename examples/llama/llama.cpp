// The model itself: constructors and forwards. Reading config.json and the weights is in
// llama_io.cpp, so this translation unit holds only what plain LibTorch code would (it is the
// one bench/compile_cost.sh compares with bench/plain_llama.cpp).
#include "llama.hpp"

#include <limits>

namespace llama {
namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  const auto x1 = x.slice(-1, 0, half);
  const auto x2 = x.slice(-1, half);
  return torch::cat({-x2, x1}, -1);
}

}  // namespace

LlamaRMSNormImpl::LlamaRMSNormImpl(std::int64_t hidden_size, double eps) : variance_epsilon(eps) {
  weight = register_parameter("weight", torch::ones({hidden_size}));
}

torch::Tensor LlamaRMSNormImpl::forward(const torch::Tensor& hidden_states) {
  const auto dtype = hidden_states.scalar_type();
  auto h = hidden_states.to(torch::kFloat32);
  const auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + variance_epsilon);
  return weight * h.to(dtype);
}

LlamaRotaryEmbeddingImpl::LlamaRotaryEmbeddingImpl(const LlamaConfig& config) {
  const auto dim = config.hidden_size / config.num_attention_heads;
  const auto exponent = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(dim);
  inv_freq = 1.0 / torch::pow(config.rope_theta, exponent);
}

PositionEmbeddings LlamaRotaryEmbeddingImpl::forward(const torch::Tensor& x, const torch::Tensor& position_ids) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto inv = inv_freq.to(x.device()).index({None, Slice(), None}).to(torch::kFloat32);
  const auto pos = position_ids.index({Slice(), None, Slice()}).to(torch::kFloat32);
  const auto freqs = torch::matmul(inv, pos).transpose(1, 2);
  const auto emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos().to(x.scalar_type()), emb.sin().to(x.scalar_type())};
}

LlamaMLPImpl::LlamaMLPImpl(const LlamaConfig& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  up_proj = register_module("up_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  down_proj = register_module("down_proj", tracetorch::nn::Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(false)));
  act_fn = register_module("act_fn", tracetorch::nn::SiLU());
}

torch::Tensor LlamaMLPImpl::forward(const torch::Tensor& x) {
  // Sequenced as Python evaluates it (gate before up), so the traces list the calls in the same order.
  auto gate = act_fn(gate_proj(x));
  return down_proj(gate * up_proj(x));
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c, std::int64_t layer_idx_)
    : head_dim(c.hidden_size / c.num_attention_heads),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads),
      layer_idx(layer_idx_),
      scaling(std::pow(static_cast<double>(c.hidden_size / c.num_attention_heads), -0.5)) {
  using torch::nn::LinearOptions;
  q_proj = register_module("q_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, num_heads * head_dim).bias(false)));
  k_proj = register_module("k_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  v_proj = register_module("v_proj", tracetorch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  o_proj = register_module("o_proj", tracetorch::nn::Linear(LinearOptions(num_heads * head_dim, c.hidden_size).bias(false)));
}

std::tuple<torch::Tensor, torch::Tensor> LlamaAttentionImpl::forward(const LlamaAttentionKeywords& kw) {
  const auto& hidden_states = *kw.hidden_states;
  const auto bsz = hidden_states.size(0);
  const auto q_len = hidden_states.size(1);
  const std::vector<std::int64_t> hidden_shape{bsz, q_len, -1, head_dim};
  auto q = q_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto k = k_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto v = v_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  const auto cos = std::get<0>(*kw.position_embeddings).unsqueeze(1);
  const auto sin = std::get<1>(*kw.position_embeddings).unsqueeze(1);
  const auto q_rot = q * cos + rotate_half(q) * sin;
  auto k_rot = k * cos + rotate_half(k) * sin;
  if (tracetorch::DynamicCache* cache = kw.past_key_values.value_or(nullptr)) {
    std::tie(k_rot, v) = cache->update(k_rot, v, layer_idx);
  }
  const auto rep = num_heads / num_kv_heads;
  k = k_rot.repeat_interleave(rep, 1);
  v = v.repeat_interleave(rep, 1);
  auto attn_weights = torch::matmul(q_rot, k.transpose(2, 3)) * scaling;
  if (kw.attention_mask.has_value() && kw.attention_mask->defined()) {
    attn_weights = attn_weights + kw.attention_mask->slice(-1, 0, k.size(-2));
  }
  attn_weights = torch::softmax(attn_weights, -1, torch::kFloat32).to(q_rot.scalar_type());
  const auto attn_output = torch::matmul(attn_weights, v).transpose(1, 2).reshape({bsz, q_len, -1});
  return {o_proj(attn_output), attn_weights};
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& c, std::int64_t layer_idx) {
  self_attn = register_module("self_attn", LlamaAttention(c, layer_idx));
  mlp = register_module("mlp", LlamaMLP(c));
  input_layernorm = register_module("input_layernorm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor LlamaDecoderLayerImpl::forward(const torch::Tensor& hidden_states, const LlamaDecoderLayerKeywords& kw) {
  auto residual = hidden_states;
  auto h = input_layernorm(hidden_states);
  // `x=x` in Python passes x's value whether or not the layer's caller passed it: `*kw.x` here.
  h = std::get<0>(self_attn({.hidden_states = h,
                             .attention_mask = *kw.attention_mask,
                             .position_ids = *kw.position_ids,
                             .past_key_values = *kw.past_key_values,
                             .use_cache = *kw.use_cache,
                             .cache_position = *kw.cache_position,
                             .position_embeddings = *kw.position_embeddings}));
  h = residual + h;
  residual = h;
  h = post_attention_layernorm(h);
  h = mlp(h);
  return residual + h;
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& c) : config(c) {
  config.validate("LlamaConfig");
  embed_tokens = register_module("embed_tokens", tracetorch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", tracetorch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(LlamaDecoderLayer(c, i));
  norm = register_module("norm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
  rotary_emb = register_module("rotary_emb", LlamaRotaryEmbedding(c));
}

BaseModelOutputWithPast LlamaModelImpl::forward(const LlamaModelInputs& inputs, const tracetorch::OutputOptions& options) {
  if (inputs.input_ids.has_value() == inputs.inputs_embeds.has_value()) {
    throw tracetorch::Error("llama: give exactly one of input_ids and inputs_embeds");
  }
  if (inputs.input_ids.has_value() && inputs.input_ids->dim() != 2) {
    throw tracetorch::Error("llama: input_ids must be [batch, seq], got " + std::to_string(inputs.input_ids->dim()) + " dimensions");
  }
  const bool use_cache = options.use_cache.value_or(config.use_cache);
  return tracetorch::capture_outputs(*this, tracetorch::merge_with_config_defaults(*this, options),
                                     [&] { return run_layers(inputs, use_cache); });
}

torch::Tensor create_causal_mask(std::int64_t batch, std::int64_t kv_length, const torch::Tensor& cache_position,
                                 const torch::TensorOptions& options) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto kv_arange = torch::arange(kv_length, cache_position.options());
  const auto allowed = kv_arange.index({None, Slice()}) <= cache_position.index({Slice(), None});
  const auto zero = torch::zeros({}, options);
  const auto minimum = torch::full({}, std::numeric_limits<float>::lowest(), options);
  return torch::where(allowed.index({None, None}).expand({batch, 1, -1, -1}), zero, minimum);
}

BaseModelOutputWithPast LlamaModelImpl::run_layers(const LlamaModelInputs& inputs, bool use_cache) {
  auto hidden_states = inputs.inputs_embeds.has_value() ? *inputs.inputs_embeds : embed_tokens(*inputs.input_ids);
  std::shared_ptr<tracetorch::DynamicCache> cache = inputs.past_key_values.value_or(nullptr);
  if (use_cache && !cache) cache = std::make_shared<tracetorch::DynamicCache>(config.num_hidden_layers);
  auto cache_position = *inputs.cache_position;
  if (!inputs.cache_position.has_value() || !cache_position.defined()) {
    const auto past_seen = cache ? cache->get_seq_length() : 0;
    cache_position = torch::arange(past_seen, past_seen + hidden_states.size(1), torch::kInt64);
  }
  auto position_ids = *inputs.position_ids;
  if (!inputs.position_ids.has_value() || !position_ids.defined()) position_ids = cache_position.unsqueeze(0);
  if (inputs.attention_mask.has_value() && inputs.attention_mask->defined()) {
    throw tracetorch::Error("llama: a padding attention_mask is not supported by this port (pass none)");
  }
  const auto kv_length = (cache ? cache->get_seq_length() : 0) + cache_position.size(0);
  const auto causal_mask = create_causal_mask(hidden_states.size(0), kv_length, cache_position, hidden_states.options());
  const auto position_embeddings = rotary_emb(hidden_states, position_ids);
  for (const auto& layer : *layers) {
    // Through the holder type, so the call is traced (as<LlamaDecoderLayerImpl> would not be).
    hidden_states = layer->as<LlamaDecoderLayer>()->forward(hidden_states, {.attention_mask = causal_mask,
                                                                            .position_ids = position_ids,
                                                                            .past_key_values = cache.get(),
                                                                            .cache_position = cache_position,
                                                                            .position_embeddings = position_embeddings});
  }
  return {.last_hidden_state = norm(hidden_states), .past_key_values = cache};
}

}  // namespace llama
