// Reading a transformers config.json, and a checkpoint into the Llama port (tracetorch/checkpoint.hpp).
#include "llama.hpp"

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>

#include <boost/json.hpp>

#include <cmath>

namespace llama {
namespace {

/// rope_scaling's object, read key by key as config.json's keys are ("type" is the older name
/// of "rope_type").
tracetorch::models::RopeScaling read_rope_scaling(const tracetorch::ConfigFile& file) {
  const auto& value = file.object().at("rope_scaling");
  if (!value.is_object()) file.fail("rope_scaling", "must be an object or null");
  const tracetorch::ConfigFile nested(boost::json::serialize(value), file.name() + ": rope_scaling");
  tracetorch::models::RopeScaling scaling;
  nested.read("type", scaling.rope_type);
  nested.read("rope_type", scaling.rope_type);
  nested.read("factor", scaling.factor);
  nested.read("low_freq_factor", scaling.low_freq_factor);
  nested.read("high_freq_factor", scaling.high_freq_factor);
  nested.read("original_max_position_embeddings", scaling.original_max_position_embeddings);
  if (scaling.rope_type != "default" && scaling.rope_type != "llama3") {
    file.fail("rope_scaling", "has rope_type \"" + scaling.rope_type + "\": only \"default\" and \"llama3\" are ported");
  }
  return scaling;
}

}  // namespace

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
  if (file.has("rope_scaling")) config.rope_scaling = read_rope_scaling(file);
  file.read("attention_bias", config.attention_bias);
  file.read("mlp_bias", config.mlp_bias);
  file.read("head_dim", config.head_dim);
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
  if (head_dim && *head_dim <= 0) fail("head_dim is " + std::to_string(*head_dim) + ": sizes must be positive");
  if (!head_dim && hidden_size % num_attention_heads != 0) fail("hidden_size is not a multiple of num_attention_heads");
  if (num_attention_heads % num_key_value_heads != 0) fail("num_attention_heads is not a multiple of num_key_value_heads");
  if (head_dim.value_or(hidden_size / num_attention_heads) % 2 != 0) fail("the head dimension must be even for rotary embeddings");
  if (rope_scaling && rope_scaling->rope_type == "llama3" &&
      (!(rope_scaling->factor > 0) || rope_scaling->high_freq_factor == rope_scaling->low_freq_factor ||
       !(rope_scaling->original_max_position_embeddings > 0))) {
    fail("rope_scaling llama3 needs factor > 0, high_freq_factor != low_freq_factor, original_max_position_embeddings > 0");
  }
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace llama
