// Reading a transformers config.json and a checkpoint into the Qwen3 port.
#include "qwen3.hpp"

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>

namespace qwen3 {

Qwen3Config Qwen3Config::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  const tracetorch::ConfigFile file(path);
  if (file.has("rope_scaling")) file.fail("rope_scaling", "must be null: only the default rope is ported for Qwen3");
  Qwen3Config config;
  auto found = tracetorch::read_config(file, config, {.ignored_keys = {"rope_scaling"}});  // and the validate hook
  if (report != nullptr) *report = std::move(found);
  return config;
}

void Qwen3Config::validate(const std::string& where) {
  const std::string at = "qwen3: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  if (!use_sliding_window) sliding_window.reset();  // Qwen3Config keeps the window only when used
  if (layer_types.empty()) {
    for (std::int64_t i = 0; i < num_hidden_layers; ++i) {
      layer_types.emplace_back(sliding_window && i >= max_window_layers ? "sliding_attention" : "full_attention");
    }
  }
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, rope_theta);
  tracetorch::check_not_negative(*this, at, num_hidden_layers);
  tracetorch::models::check_layer_types(*this, at);
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if (head_dim % 2 != 0) fail("head_dim must be even for rotary embeddings");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace qwen3
