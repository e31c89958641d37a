// Reading a transformers config.json and a checkpoint into the Qwen2-MoE port.
#include "qwen2_moe.hpp"

#include <tracetorch/checkpoint.hpp>

namespace qwen2_moe {

void RopeParameters::validate(const std::string& where) const {
  const std::string at = "qwen2_moe: " + where;
  if (rope_type != "default") throw tracetorch::Error(at + ": rope_type \"" + rope_type + "\" is not ported (only \"default\" is)");
  tracetorch::check_positive(*this, at, rope_theta);
}

Qwen2MoeConfig Qwen2MoeConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  return tracetorch::load_config<Qwen2MoeConfig>(path, report);
}

void Qwen2MoeConfig::validate(const std::string& where) const {
  const std::string at = "qwen2_moe: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, max_position_embeddings, decoder_sparse_step, moe_intermediate_size,
                             shared_expert_intermediate_size, rms_norm_eps);
  tracetorch::check_not_negative(*this, at, num_hidden_layers, num_experts);
  if (num_experts > 0 && (num_experts_per_tok <= 0 || num_experts_per_tok > num_experts)) {
    fail("num_experts_per_tok must be in [1, num_experts]");
  }
  if (!layer_types.empty() && static_cast<std::int64_t>(layer_types.size()) != num_hidden_layers) {
    fail("layer_types must have one entry per layer");
  }
  for (const auto& type : layer_types) {
    if (type != "full_attention") fail("layer_types: \"" + type + "\" is not ported (sliding-window layers are not)");
  }
  if (use_sliding_window) fail("use_sliding_window: sliding-window layers are not ported");
  if (hidden_size % num_attention_heads != 0) fail("hidden_size is not a multiple of num_attention_heads");
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if ((hidden_size / num_attention_heads) % 2 != 0) fail("the head dimension must be even for rotary embeddings");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace qwen2_moe
