// Reading a transformers config.json and a checkpoint into the Qwen2-MoE port.
#include "qwen2_moe.hpp"

#include <tracetorch/checkpoint.hpp>

#include <cmath>
#include <utility>

namespace qwen2_moe {

void RopeParameters::validate(const std::string& where) const {
  if (rope_type != "default") {
    throw tracetorch::Error("qwen2_moe: " + where + ": rope_type \"" + rope_type + "\" is not ported (only \"default\" is)");
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) throw tracetorch::Error("qwen2_moe: " + where + ": rope_theta must be a finite number > 0");
}

Qwen2MoeConfig Qwen2MoeConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  return tracetorch::load_config<Qwen2MoeConfig>(path, report);
}

void Qwen2MoeConfig::validate(const std::string& where) const {
  const auto fail = [&](const std::string& why) { throw tracetorch::Error("qwen2_moe: " + where + ": " + why); };
  tracetorch::check_positive(*this, "qwen2_moe: " + where, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, max_position_embeddings, decoder_sparse_step, moe_intermediate_size,
                             shared_expert_intermediate_size);
  tracetorch::check_not_negative(*this, "qwen2_moe: " + where, num_hidden_layers, num_experts);
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
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) fail("rms_norm_eps must be a finite number > 0");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace qwen2_moe
