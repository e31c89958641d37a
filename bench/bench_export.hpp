#pragma once
// tracetorch_bench's files for other programs: the bundle that bench/side_by_side.py hands to
// transformers' debugger (the same config, weights and input ids as the bench's models), and
// every timed sample, so that a driver can pool the samples of several interleaved runs.

#include <llama/llama.hpp>
#include <tracetorch/safetensors.hpp>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench_export {

/// A bundle's input ids {"input_ids"} and the C++ side's last_hidden_state {"data"}, which the
/// other side checks its own output against.
inline void write_input_and_output(const std::filesystem::path& dir, const torch::Tensor& input_ids,
                                   const torch::Tensor& last_hidden_state) {
  tracetorch::safetensors::save(dir / "input_ids.safetensors", {{"input_ids", input_ids}});
  tracetorch::safetensors::save(dir / "last_hidden_state.safetensors", last_hidden_state);
}

/// Writes DIR/config.json (transformers' LlamaConfig keys), model.safetensors (the annotated
/// model's state dict, transformers' names), input_ids.safetensors {"input_ids"} and
/// last_hidden_state.safetensors {"data"} (the annotated model's output, for the other side's check).
inline void write_bundle(const std::filesystem::path& dir, const llama::LlamaConfig& c, torch::nn::Module& model,
                         const torch::Tensor& input_ids, const torch::Tensor& last_hidden_state) {
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir / "config.json");
    config << std::setprecision(17) << "{\"model_type\": \"llama\", \"vocab_size\": " << c.vocab_size
           << ", \"hidden_size\": " << c.hidden_size << ", \"intermediate_size\": " << c.intermediate_size
           << ", \"num_hidden_layers\": " << c.num_hidden_layers << ", \"num_attention_heads\": " << c.num_attention_heads
           << ", \"num_key_value_heads\": " << c.num_key_value_heads
           << ", \"max_position_embeddings\": " << c.max_position_embeddings << ", \"rms_norm_eps\": " << c.rms_norm_eps
           << ", \"rope_theta\": " << c.rope_theta << ", \"hidden_act\": \"silu\", \"torch_dtype\": \"float32\"}\n";
    if (!config) throw std::runtime_error("cannot write " + (dir / "config.json").string());
  }
  tracetorch::safetensors::NamedTensors weights;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) weights.emplace_back(item.key(), item.value());
  tracetorch::safetensors::save(dir / "model.safetensors", weights);
  write_input_and_output(dir, input_ids, last_hidden_state);
}

/// The Qwen2-MoE bundle (--config moe): the fixture's own config.json and model.safetensors,
/// copied as they are (the other side raises max_position_embeddings to the sequence length, as
/// the bench does), and the bench's input ids and last_hidden_state.
inline void write_moe_bundle(const std::filesystem::path& dir, const std::filesystem::path& fixture,
                             const torch::Tensor& input_ids, const torch::Tensor& last_hidden_state) {
  std::filesystem::create_directories(dir);
  for (const char* name : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(fixture / name, dir / name, std::filesystem::copy_options::overwrite_existing);
  }
  write_input_and_output(dir, input_ids, last_hidden_state);
}

/// Appends one line per mode to FILE: `config<TAB>mode letter<TAB>seconds per forward, space separated`.
inline void append_samples(const std::filesystem::path& file, const std::string& config, char mode,
                           const std::vector<double>& seconds) {
  std::ofstream out(file, std::ios::app);
  out << config << '\t' << mode << '\t' << std::setprecision(9);
  for (std::size_t i = 0; i < seconds.size(); ++i) out << (i ? " " : "") << seconds[i];
  out << '\n';
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace bench_export
