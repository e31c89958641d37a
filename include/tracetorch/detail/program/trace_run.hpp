#pragma once
/// \file
/// What a trace program does once its command line is read: the config, the inputs, the model
/// and its weights, the traced call, and what it prints (tracetorch/trace_program.hpp).

#include <torch/torch.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/program/root_call.hpp"
#include "tracetorch/detail/program/trace_arguments.hpp"

namespace tracetorch::detail {

/// The input ids of a safetensors file, checked from its header before anything is loaded:
/// one int64 [batch, seq] tensor, not empty; then every id within [0, vocab_size) where the
/// vocabulary is known (vocab_size > 0).
inline torch::Tensor read_input_ids(std::string_view program, const std::filesystem::path& path, std::int64_t vocab_size) {
  const auto fail = [&](const std::string& why) { throw Error(std::string(program) + ": " + path.string() + ": " + why); };
  safetensors::Reader reader(path);
  std::string name = "input_ids";
  if (!reader.contains(name)) {
    if (reader.header().tensors.size() != 1) fail("holds no tensor \"input_ids\"");
    name = reader.header().tensors.front().name;
  }
  const auto& info = reader.info(name);
  if (info.shape.size() != 2 || info.dtype != torch::kInt64) fail("input ids must be an int64 [batch, seq] tensor");
  if (info.shape[0] == 0 || info.shape[1] == 0) {
    fail("input ids are empty (shape [" + std::to_string(info.shape[0]) + ", " + std::to_string(info.shape[1]) + "])");
  }
  auto ids = reader.load(name);
  if (vocab_size > 0 && (ids.min().item<std::int64_t>() < 0 || ids.max().item<std::int64_t>() >= vocab_size)) {
    fail("input ids outside [0, vocab_size=" + std::to_string(vocab_size) + "): min " +
         std::to_string(ids.min().item<std::int64_t>()) + ", max " + std::to_string(ids.max().item<std::int64_t>()));
  }
  return ids;
}

/// The vocabulary size of a config that has one (vocab_size), else 0.
template <class Config>
std::int64_t config_vocab_size(const Config& config) {
  if constexpr (requires { static_cast<std::int64_t>(config.vocab_size); }) {
    return static_cast<std::int64_t>(config.vocab_size);
  } else {
    return 0;
  }
}

/// "4 layers, hidden 64" from transformers' usual keys (num_hidden_layers/n_layer, hidden_size/n_embd).
template <class Config>
std::string describe_config(const Config& config) {
  std::string out;
  if constexpr (requires { config.num_hidden_layers; }) {
    out = std::to_string(config.num_hidden_layers) + " layers";
  } else if constexpr (requires { config.n_layer; }) {
    out = std::to_string(config.n_layer) + " layers";
  }
  std::string hidden;
  if constexpr (requires { config.hidden_size; }) {
    hidden = std::to_string(config.hidden_size);
  } else if constexpr (requires { config.n_embd; }) {
    hidden = std::to_string(config.n_embd);
  }
  if (!hidden.empty()) out += (out.empty() ? "" : ", ") + std::string("hidden ") + hidden;
  return out;
}

/// Prints each leaf's output shape from the written summary: the view one gets by setting
/// breakpoints in every module.
inline void print_leaf_shapes(const boost::json::value& node) {
  const auto& object = node.as_object();
  if (const auto* children = object.if_contains("children")) {
    for (const auto& child : children->as_array()) print_leaf_shapes(child);
    return;
  }
  const auto* outputs = object.if_contains("outputs");
  std::string shapes;
  const auto collect = [&](const auto& self, const boost::json::value& value) -> void {
    if (value.is_object()) {
      if (const auto* shape = value.as_object().if_contains("shape")) {
        if (!shapes.empty()) shapes += ", ";
        shapes += std::string(shape->as_string());
        return;
      }
      for (const auto& entry : value.as_object()) self(self, entry.value());
    } else if (value.is_array()) {
      for (const auto& element : value.as_array()) self(self, element);
    }
  };
  if (outputs != nullptr) collect(collect, *outputs);
  std::cout << "  " << std::string(object.at("module_path").as_string()) << " -> " << (shapes.empty() ? "(no tensor)" : shapes)
            << "\n";
}

inline void print_leaf_shapes_of(const std::filesystem::path& summary) {
  const std::string text = read_regular_file(summary, std::size_t(1) << 30, "a trace summary");
  print_leaf_shapes(boost::json::parse(text));
}

/// Writes each tensor field of the output to DIR/<field>.safetensors and each captured tuple to
/// DIR/<field>_<i>.safetensors (key "data"): the names of the reference bundles' captured.safetensors.
/// A field left None or undefined is skipped; a cache is no tensor and is skipped.
template <class Output>
void dump_captured(std::string_view program, const std::filesystem::path& dir, const Output& output) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(std::string(program) + ": cannot create " + dir.string() + ": " + ec.message());
  const auto dump = [&](std::string_view name, const auto& field) {
    using Field = std::remove_cvref_t<decltype(field)>;
    if constexpr (std::is_same_v<Field, std::optional<std::vector<torch::Tensor>>>) {
      if (!field) return;
      for (std::size_t i = 0; i < field->size(); ++i) {
        if (!(*field)[i].defined()) continue;
        safetensors::save(dir / (std::string(name) + "_" + std::to_string(i) + ".safetensors"), (*field)[i]);
      }
      std::cout << "wrote " << field->size() << " " << name << " to " << dir.string() << "\n";
    } else if constexpr (std::is_same_v<Field, torch::Tensor>) {
      if (!field.defined()) return;
      safetensors::save(dir / (std::string(name) + ".safetensors"), field);
      std::cout << "wrote " << name << " to " << dir.string() << "\n";
    }
  };
  if constexpr (requires { tracetorch_fields(output, dump); }) {
    tracetorch_fields(output, dump);
  } else {
    if constexpr (requires { output.hidden_states; }) dump("hidden_states", output.hidden_states);
    if constexpr (requires { output.attentions; }) dump("attentions", output.attentions);
  }
}

/// Writes `text` to `path`; tracetorch::Error naming the file where it cannot.
inline void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error("tracetorch: " + path.string() + ": cannot write the file");
}

/// Sets the root call's keywords from the command line: --call first, then --inputs' tensor
/// names (checked from the header only), as the parse step does; UsageError for a bad one.
template <class Values>
void apply_call_arguments(RootCall<Values>& root, const TraceArguments& args) {
  for (const auto& [name, literal] : args.calls) {
    try {
      root.set(name, parse_python_literal(literal, "--call " + name));
    } catch (const Error& e) {
      throw command_line::UsageError("--call " + name + "=" + literal + ": " + e.what());
    }
  }
  if (args.inputs) {
    std::optional<safetensors::Reader> opened;
    try {
      opened.emplace(*args.inputs);
    } catch (const Error& e) {
      throw command_line::UsageError("--inputs " + args.inputs->string() + ": " + e.what());
    }
    const safetensors::Reader& reader = *opened;
    for (const auto& info : reader.header().tensors) {
      if (!root.takes(info.name)) {
        throw command_line::UsageError("--inputs " + args.inputs->string() + ": tensor '" + info.name +
                                       "' is not a keyword of the call: the call's keywords are " + join_names(root.names()));
      }
    }
  }
}

/// Loads --inputs' tensors into the root call, each as the keyword of its name.
template <class Values>
void load_inputs_file(RootCall<Values>& root, const std::filesystem::path& path) {
  const safetensors::Reader reader(path);
  for (const auto& info : reader.header().tensors) root.set(info.name, PythonValue::of_tensor(reader.load(info.name)));
}

}  // namespace tracetorch::detail
