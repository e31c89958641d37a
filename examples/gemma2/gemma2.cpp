// The Gemma2 port's own decoder layer, and the shared decoder parts instantiated for its family,
// compiled here once.
#include "gemma2.hpp"

template struct tracetorch::models::RMSNormImpl<gemma2::Gemma2>;
template struct tracetorch::models::GatedMLPImpl<gemma2::Gemma2>;
template struct tracetorch::models::AttentionImpl<gemma2::Gemma2>;
template struct tracetorch::models::ModelImpl<gemma2::Gemma2>;

namespace gemma2 {

Gemma2AttentionKeywords Gemma2::attention_keywords(const torch::Tensor& hidden_states, const Gemma2DecoderLayerKeywords& kw) {
  return {.hidden_states = hidden_states,
          .position_embeddings = *kw.position_embeddings,
          .attention_mask = *kw.attention_mask,
          .position_ids = *kw.position_ids,
          .past_key_values = *kw.past_key_values,
          .cache_position = *kw.cache_position};
}

Gemma2DecoderLayerImpl::Gemma2DecoderLayerImpl(const Gemma2Config& c, std::int64_t layer_idx) {
  self_attn = register_module("self_attn", Gemma2Attention(c, layer_idx));
  mlp = register_module("mlp", Gemma2MLP(c));
  input_layernorm = register_module("input_layernorm", Gemma2RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", Gemma2RMSNorm(c.hidden_size, c.rms_norm_eps));
  pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", Gemma2RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_feedforward_layernorm = register_module("post_feedforward_layernorm", Gemma2RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor Gemma2DecoderLayerImpl::forward(const torch::Tensor& hidden_states, const Gemma2DecoderLayerKeywords& kw) {
  auto residual = hidden_states;
  auto attn_output = std::get<0>(self_attn(Gemma2::attention_keywords(input_layernorm(hidden_states), kw)));
  auto h = residual + post_attention_layernorm(attn_output);
  residual = h;
  return residual + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)));
}

}  // namespace gemma2
