// Reading a transformers config.json, and a checkpoint into the Llama port (tracetorch/checkpoint.hpp).
#include "llama.hpp"

#include <tracetorch/checkpoint.hpp>
#include <tracetorch/config_file.hpp>

#include <boost/json.hpp>

namespace llama {

LlamaConfig LlamaConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  const tracetorch::ConfigFile file(path);
  LlamaConfig config;
  file.read("num_attention_heads", config.num_key_value_heads);  // transformers' default: one kv head per head
  // An older config names rope_scaling's rope_type "type".
  const auto* scaling = file.object().if_contains("rope_scaling");
  const bool older_type = scaling && scaling->is_object() && scaling->as_object().contains("type");
  auto found = tracetorch::read_config(file, config, {.ignored_keys = {"rope_scaling.type"}});
  if (report != nullptr) *report = std::move(found);
  if (older_type && !scaling->as_object().contains("rope_type")) {
    tracetorch::ConfigFile(boost::json::serialize(*scaling), file.name() + ": rope_scaling").read("type", config.rope_scaling->rope_type);
  }
  config.validate(path.string());  // again: rope_type is known only now
  return config;
}

void LlamaConfig::validate(const std::string& where) const {
  const std::string at = "llama: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  // Each key named in its message, so that the one line says which to fix.
  tracetorch::check_positive(*this, at, vocab_size, hidden_size, intermediate_size, num_attention_heads,
                             num_key_value_heads, max_position_embeddings, rms_norm_eps, rope_theta, head_dim);
  tracetorch::check_not_negative(*this, at, num_hidden_layers);
  if (rope_scaling && rope_scaling->rope_type != "default" && rope_scaling->rope_type != "llama3") {
    fail("rope_scaling has rope_type \"" + rope_scaling->rope_type + "\": only \"default\" and \"llama3\" are ported");
  }
  if (hidden_act != "silu") fail("hidden_act \"" + hidden_act + "\" is not ported (the Llama MLP's activation is SiLU)");
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
