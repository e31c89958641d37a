// Reading a transformers config.json and a checkpoint into the Gemma2 port.
#include "gemma2.hpp"

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>

namespace gemma2 {

Gemma2Config Gemma2Config::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  return tracetorch::load_config<Gemma2Config>(path, report);  // runs validate
}

void Gemma2Config::validate(const std::string& where) {
  const std::string at = "gemma2: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  if (layer_types.empty()) {  // as Gemma2Config derives them: sliding first, then every other layer
    for (std::int64_t i = 0; i < num_hidden_layers; ++i) layer_types.emplace_back((i + 1) % 2 ? "sliding_attention" : "full_attention");
  }
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, query_pre_attn_scalar);
  tracetorch::check_not_negative(*this, at, num_hidden_layers);
  tracetorch::models::check_layer_types(*this, at);
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if (head_dim % 2 != 0) fail("head_dim must be even for rotary embeddings");
  if (!(rope_parameters.rope_theta > 0)) fail("rope_parameters.rope_theta must be positive");
  if (rope_parameters.rope_type != "default") fail("rope_parameters.rope_type: only \"default\" is ported");
  if (attn_logit_softcapping && !(*attn_logit_softcapping > 0)) fail("attn_logit_softcapping must be positive or null");
  if (use_bidirectional_attention.value_or(false)) fail("use_bidirectional_attention: only causal attention is ported");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_activation);  // throws, listing the known names, for an unknown one
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace gemma2
