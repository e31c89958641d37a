// Reading a transformers config.json, and a checkpoint into the Llama port (tracetorch/checkpoint.hpp).
#include "llama.hpp"

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>

#include <cmath>

namespace llama {

LlamaConfig LlamaConfig::from_json_file(const std::filesystem::path& path) {
  const tracetorch::ConfigFile file(path);
  LlamaConfig config;
  file.read("vocab_size", config.vocab_size);
  file.read("hidden_size", config.hidden_size);
  file.read("intermediate_size", config.intermediate_size);
  file.read("num_hidden_layers", config.num_hidden_layers);
  file.read("num_attention_heads", config.num_attention_heads);
  config.num_key_value_heads = config.num_attention_heads;  // transformers' default
  file.read("num_key_value_heads", config.num_key_value_heads);
  file.read("max_position_embeddings", config.max_position_embeddings);
  file.read("rms_norm_eps", config.rms_norm_eps);
  file.read("rope_theta", config.rope_theta);
  file.read("output_hidden_states", config.output_hidden_states);
  file.read("output_attentions", config.output_attentions);
  file.read("use_cache", config.use_cache);
  config.validate(path.string());
  return config;
}

void LlamaConfig::validate(const std::string& where) const {
  const auto fail = [&](const std::string& why) { throw tracetorch::Error("llama: " + where + ": " + why); };
  // Each size named, so that the one line says which key to fix.
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [key, value] : sizes) {
    if (value <= 0) fail(std::string(key) + " is " + std::to_string(value) + ": sizes must be positive");
  }
  if (num_hidden_layers < 0) fail("num_hidden_layers is " + std::to_string(num_hidden_layers) + ": it must be >= 0");
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) fail("rms_norm_eps must be a finite number > 0");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) fail("rope_theta must be a finite number > 0");
  if (hidden_size % num_attention_heads != 0) fail("hidden_size is not a multiple of num_attention_heads");
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if ((hidden_size / num_attention_heads) % 2 != 0) fail("the head dimension must be even for rotary embeddings");
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace llama
