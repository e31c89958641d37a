#pragma once
// Shared by the diff test files: the fixtures' paths, hand-made traces (a one-module trace of
// tensor files, use_repr=true values and calls) and the reading of a DiffReport.

#include <tracetorch/diff.hpp>

#include "test_helpers.hpp"

#include <filesystem>
#include <fstream>
#include <string>

namespace tracetorch_test {

/// The tiny Llama's directory (tests/data/tiny_llama_upstream: Python reference traces).
inline std::filesystem::path tiny() { return tracetorch_test::tiny_llama_dir(); }
/// A trace of the same model with a bug planted in the Python reference (tests/data/diff/<bug>).
inline std::filesystem::path planted(const std::string& bug) { return tracetorch_test::data_dir() / "diff" / bug; }

/// A one-module trace "M" with an input tensor and an output tensor, stored as safetensors files.
inline void write_small_trace(const std::filesystem::path& dir, const torch::Tensor& input, const torch::Tensor& output,
                              const std::string& root = "M") {
  std::filesystem::create_directories(dir);
  tracetorch::safetensors::save(dir / (root + ".leaf_inputs_args_0.safetensors"), input);
  tracetorch::safetensors::save(dir / (root + ".leaf_outputs.safetensors"), output);
  const auto tensor_json = [&](const torch::Tensor& t, const std::string& stem) {
    return boost::json::object{{"shape", tracetorch::python_shape_repr(t.sizes())},
                               {"dtype", tracetorch::python_dtype_repr(t.scalar_type())},
                               {"value", "./" + stem + ".safetensors"}};
  };
  boost::json::object leaf{{"module_path", root + ".leaf"},
                           {"inputs", {{"args", boost::json::array{tensor_json(input, root + ".leaf_inputs_args_0")}}}},
                           {"outputs", tensor_json(output, root + ".leaf_outputs")}};
  boost::json::object top{{"module_path", root}, {"inputs", {{"args", boost::json::array{}}}},
                          {"children", boost::json::array{leaf}}};
  std::ofstream(dir / (root + "_debug_tree_FULL_TENSORS.json")) << boost::json::serialize(top);
}

/// A module call node; `outputs` left out when null, as the debugger leaves out a parent's.
inline boost::json::object node(const std::string& path, boost::json::object inputs, boost::json::value outputs = nullptr,
                                boost::json::array children = {}) {
  boost::json::object out{{"module_path", path}, {"inputs", std::move(inputs)}};
  if (!outputs.is_null()) out["outputs"] = std::move(outputs);
  if (!children.empty()) out["children"] = std::move(children);
  return out;
}

/// Writes a hand-made trace whose root is "M" into `dir`.
inline std::filesystem::path write_trace(const std::filesystem::path& dir, const boost::json::object& root) {
  std::filesystem::create_directories(dir);
  write_text(dir / "M_debug_tree_FULL_TENSORS.json", boost::json::serialize(root));
  return dir;
}

/// Copies a trace directory so that one file of it can be spoiled.
inline std::filesystem::path copy_trace(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  return to;
}

/// A printed tensor value of a hand-made use_repr=true trace: `numbers` of a tensor of `shape`.
inline boost::json::object printed(const std::string& numbers, const std::string& shape = "[2]",
                                   const std::string& dtype = "float32") {
  return {{"shape", "torch.Size(" + shape + ")"}, {"dtype", "torch." + dtype},
          {"value", boost::json::array{"tensor([" + numbers + "])"}}};
}

/// Where a diff report's first divergence is, or "none".
inline std::string first_divergence(const tracetorch::DiffReport& report) {
  return report.first_divergence ? report.tensors[*report.first_divergence].where() : "none";
}

}  // namespace tracetorch_test
