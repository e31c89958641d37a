// Reading a transformers config.json, and a checkpoint into the Llama port (tracetorch/checkpoint.hpp).
#include "llama.hpp"

#include <boost/json.hpp>
#include <tracetorch/checkpoint.hpp>
#include <tracetorch/detail/io/read_file.hpp>

#include <cmath>
#include <fstream>
#include <iterator>

namespace llama {
namespace {

std::string read_text(const std::filesystem::path& path) {
  // The shared check: a FIFO or device is refused, not read; a directory is named as such.
  return tracetorch::detail::read_regular_file(path, tracetorch::detail::kMaxConfigBytes, "a config.json");
}

}  // namespace

LlamaConfig LlamaConfig::from_json_file(const std::filesystem::path& path) {
  const std::string text = read_text(path);
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(text, ec);
  if (ec) throw tracetorch::Error("llama: " + path.string() + " is not valid JSON: " + ec.message());
  if (!parsed.is_object()) throw tracetorch::Error("llama: " + path.string() + " must hold a JSON object");
  const auto& object = parsed.as_object();
  LlamaConfig config;
  const auto read_int = [&](const char* key, std::int64_t& field) {
    const auto* value = object.if_contains(key);
    if (value == nullptr) return;
    if (value->is_int64()) {
      field = value->get_int64();
    } else if (value->is_uint64()) {  // only above int64's range: a cast would make it negative
      throw tracetorch::Error("llama: " + path.string() + ": \"" + key + "\" is " + std::to_string(value->get_uint64()) +
                              ", too large");
    } else {
      throw tracetorch::Error("llama: " + path.string() + ": \"" + key + "\" must be an integer");
    }
  };
  const auto read_double = [&](const char* key, double& field) {
    const auto* value = object.if_contains(key);
    if (value == nullptr) return;
    if (value->is_number()) {
      field = value->to_number<double>();
    } else {
      throw tracetorch::Error("llama: " + path.string() + ": \"" + key + "\" must be a number");
    }
  };
  read_int("vocab_size", config.vocab_size);
  read_int("hidden_size", config.hidden_size);
  read_int("intermediate_size", config.intermediate_size);
  read_int("num_hidden_layers", config.num_hidden_layers);
  read_int("num_attention_heads", config.num_attention_heads);
  config.num_key_value_heads = config.num_attention_heads;  // transformers' default
  read_int("num_key_value_heads", config.num_key_value_heads);
  read_int("max_position_embeddings", config.max_position_embeddings);
  read_double("rms_norm_eps", config.rms_norm_eps);
  read_double("rope_theta", config.rope_theta);
  const auto read_bool = [&](const char* key, bool& field) {
    const auto* value = object.if_contains(key);
    if (value == nullptr) return;
    if (!value->is_bool()) throw tracetorch::Error("llama: " + path.string() + ": \"" + key + "\" must be true or false");
    field = value->get_bool();
  };
  read_bool("output_hidden_states", config.output_hidden_states);
  read_bool("output_attentions", config.output_attentions);
  read_bool("use_cache", config.use_cache);
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
