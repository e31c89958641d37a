#include "plain_llama.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace plain_llama {
namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

}  // namespace

RMSNormImpl::RMSNormImpl(std::int64_t hidden_size, double eps) : variance_epsilon(eps) {
  weight = register_parameter("weight", torch::ones({hidden_size}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& hidden_states) {
  const auto dtype = hidden_states.scalar_type();
  auto h = hidden_states.to(torch::kFloat32);
  const auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + variance_epsilon);
  return weight * h.to(dtype);
}

RotaryEmbeddingImpl::RotaryEmbeddingImpl(const Config& config) {
  const auto dim = config.hidden_size / config.num_attention_heads;
  const auto exponent = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(dim);
  inv_freq = 1.0 / torch::pow(config.rope_theta, exponent);
}

PositionEmbeddings RotaryEmbeddingImpl::forward(const torch::Tensor& x, const torch::Tensor& position_ids) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto inv = inv_freq.to(x.device()).index({None, Slice(), None}).to(torch::kFloat32);
  const auto pos = position_ids.index({Slice(), None, Slice()}).to(torch::kFloat32);
  const auto freqs = torch::matmul(inv, pos).transpose(1, 2);
  const auto emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos().to(x.scalar_type()), emb.sin().to(x.scalar_type())};
}

MLPImpl::MLPImpl(const Config& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(false)));
  act_fn = register_module("act_fn", torch::nn::SiLU());
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  auto gate = act_fn(gate_proj(x));
  return down_proj(gate * up_proj(x));
}

AttentionImpl::AttentionImpl(const Config& c)
    : head_dim(c.hidden_size / c.num_attention_heads),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads),
      scaling(std::pow(static_cast<double>(c.hidden_size / c.num_attention_heads), -0.5)) {
  using torch::nn::LinearOptions;
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_heads * head_dim).bias(false)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(num_heads * head_dim, c.hidden_size).bias(false)));
}

std::tuple<torch::Tensor, torch::Tensor> AttentionImpl::forward(const torch::Tensor& hidden_states,
                                                                const PositionEmbeddings& position_embeddings,
                                                                const torch::Tensor& attention_mask, LayerCache* cache) {
  const auto bsz = hidden_states.size(0);
  const auto q_len = hidden_states.size(1);
  const std::vector<std::int64_t> hidden_shape{bsz, q_len, -1, head_dim};
  auto q = q_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto k = k_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  auto v = v_proj(hidden_states).view(hidden_shape).transpose(1, 2);
  const auto cos = std::get<0>(position_embeddings).unsqueeze(1);
  const auto sin = std::get<1>(position_embeddings).unsqueeze(1);
  const auto q_rot = q * cos + rotate_half(q) * sin;
  auto k_rot = k * cos + rotate_half(k) * sin;
  if (cache != nullptr) {  // what the annotated port's DynamicCache does on a first forward
    cache->keys = k_rot;
    cache->values = v;
  }
  const auto rep = num_heads / num_kv_heads;
  k = k_rot.repeat_interleave(rep, 1);
  v = v.repeat_interleave(rep, 1);
  auto attn_weights = torch::matmul(q_rot, k.transpose(2, 3)) * scaling;
  if (attention_mask.defined()) attn_weights = attn_weights + attention_mask.slice(-1, 0, k.size(-2));
  attn_weights = torch::softmax(attn_weights, -1, torch::kFloat32).to(q_rot.scalar_type());
  const auto attn_output = torch::matmul(attn_weights, v).transpose(1, 2).reshape({bsz, q_len, -1});
  return {o_proj(attn_output), attn_weights};
}

DecoderLayerImpl::DecoderLayerImpl(const Config& c) {
  self_attn = register_module("self_attn", Attention(c));
  mlp = register_module("mlp", MLP(c));
  input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& hidden_states, const PositionEmbeddings& position_embeddings,
                                        const torch::Tensor& attention_mask, LayerCache* cache,
                                        torch::Tensor* attention_weights) {
  auto residual = hidden_states;
  auto h = input_layernorm(hidden_states);
  auto [attn_output, weights] = self_attn(h, position_embeddings, attention_mask, cache);
  if (attention_weights != nullptr) *attention_weights = std::move(weights);
  h = std::move(attn_output);
  h = residual + h;
  residual = h;
  h = post_attention_layernorm(h);
  h = mlp(h);
  return residual + h;
}

ModelImpl::ModelImpl(const Config& c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c));
  norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  rotary_emb = register_module("rotary_emb", RotaryEmbedding(c));
}

torch::Tensor ModelImpl::forward(const torch::Tensor& input_ids) {
  return run(input_ids, nullptr, nullptr);
}

torch::Tensor ModelImpl::forward_collecting(const torch::Tensor& input_ids, std::vector<torch::Tensor>& hidden_states,
                                            std::vector<torch::Tensor>& attentions) {
  return run(input_ids, &hidden_states, &attentions);
}

torch::Tensor ModelImpl::run(const torch::Tensor& input_ids, std::vector<torch::Tensor>* all_hidden,
                             std::vector<torch::Tensor>* all_attentions) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  const auto bsz = input_ids.size(0);
  const auto seq = input_ids.size(1);
  auto hidden_states = embed_tokens(input_ids);
  // The same work as the annotated (upstream-convention) port: a cache, cache_position,
  // position_ids [1, seq] and the eager mask [batch, 1, seq, seq] of 0 and float32's minimum.
  std::vector<LayerCache> cache(layers->size());
  const auto cache_position = torch::arange(seq, torch::kInt64);
  const auto position_ids = cache_position.unsqueeze(0);
  const auto allowed = cache_position.index({None, Slice()}) <= cache_position.index({Slice(), None});
  const auto mask = torch::where(allowed.index({None, None}).expand({bsz, 1, -1, -1}), torch::zeros({}, hidden_states.options()),
                                 torch::full({}, std::numeric_limits<float>::lowest(), hidden_states.options()));
  const auto position_embeddings = rotary_emb(hidden_states, position_ids);
  std::size_t index = 0;
  for (const auto& layer : *layers) {
    if (all_hidden != nullptr) all_hidden->push_back(hidden_states);
    torch::Tensor weights;
    hidden_states = layer->as<DecoderLayer>()->forward(hidden_states, position_embeddings, mask, &cache[index++],
                                                       all_attentions != nullptr ? &weights : nullptr);
    if (all_attentions != nullptr) all_attentions->push_back(std::move(weights));
  }
  auto last = norm(hidden_states);
  if (all_hidden != nullptr) all_hidden->push_back(last);
  return last;
}

}  // namespace plain_llama
