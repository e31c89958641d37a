// Reading a transformers config.json and a checkpoint into the Llava port.
#include "llava.hpp"

#include <tracetorch/checkpoint.hpp>

#include <cmath>
#include <iostream>

namespace llava {

LlavaConfig LlavaConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  tracetorch::ConfigReport found;
  auto config = tracetorch::load_config<LlavaConfig>(path, &found);
  if (report != nullptr) {
    *report = std::move(found);
  } else if (!found.unknown_keys.empty()) {
    std::cerr << "llava: " << found.describe(path.string()) << " (ignored)\n";
  }
  return config;
}

void LlamaConfig::validate(const std::string& where) const {
  const std::string at = "llava: " + where + ": text_config";  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, max_position_embeddings, head_dim, rms_norm_eps);
  tracetorch::check_not_negative(*this, at, num_hidden_layers);
  const auto heads = num_key_value_heads.value_or(num_attention_heads);
  if (num_attention_heads % heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if (!head_dim && hidden_size % num_attention_heads != 0) fail("hidden_size is not a multiple of num_attention_heads");
  if (head_dim.value_or(hidden_size / num_attention_heads) % 2 != 0) fail("head_dim must be even for rotary embeddings");
  if (rope_parameters.rope_type != "default") fail("rope_parameters.rope_type \"" + rope_parameters.rope_type + "\" is not ported (\"default\" is)");
  if (!(rope_parameters.rope_theta > 0) || !std::isfinite(rope_parameters.rope_theta)) fail("rope_parameters.rope_theta must be a finite number > 0");
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size)) fail("pad_token_id must be in [0, vocab_size)");
  tracetorch::nn::get_activation(hidden_act);  // throws, listing the known names, for an unknown one
}

void LlavaConfig::validate(const std::string& where) const {
  const auto fail = [&](const std::string& why) { throw tracetorch::Error("llava: " + where + ": " + why); };
  if (image_token_index < 0) fail("image_token_index must be >= 0");
  if (vision_feature_select_strategy != "default" && vision_feature_select_strategy != "full") {
    fail("vision_feature_select_strategy must be \"default\" or \"full\", got \"" + vision_feature_select_strategy + "\"");
  }
  const auto states = vision_config.num_hidden_layers + 1;  // the embeddings, then each layer's output
  if (vision_feature_layer < -states || vision_feature_layer >= states) fail("vision_feature_layer is out of range for the vision tower's hidden states");
  if (tie_word_embeddings) fail("tie_word_embeddings is not ported");
  tracetorch::nn::get_activation(projector_hidden_act);
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace llava
