#pragma once
// Shared by the debugger's test files (test_debugger*.cpp): the tiny Llama port with its fixture
// weights and input ids, and a file's inode (reused tensors are hard links).

#include <tracetorch/tracetorch.hpp>

#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <stdexcept>

namespace tracetorch_test {

inline llama::LlamaModel make_tiny_llama() {
  const auto config = llama::LlamaConfig::from_json_file(tiny_llama_dir() / "config.json");
  llama::LlamaModel model(config);
  model->eval();
  llama::load_state_dict(*model, tiny_llama_dir() / "model.safetensors");
  return model;
}

inline torch::Tensor tiny_input_ids() { return tracetorch::safetensors::load(tiny_llama_dir() / "input_ids.safetensors").at("input_ids"); }

/// The inode of `path`: two names of one file (a hard link) have the same.
inline ino_t inode_of(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw std::runtime_error("cannot stat " + path.string());
  return info.st_ino;
}

}  // namespace tracetorch_test
