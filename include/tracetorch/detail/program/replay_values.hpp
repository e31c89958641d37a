#pragma once
/// \file
/// Module replay's values on both sides: a reference call's recorded inputs as Python values
/// (tensors from their files, reprs read back), and a replayed call's arguments and results as
/// the reader's slots, built by the debugger's own JSON builder with the tensors kept in memory.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/debugger/call_json.hpp"
#include "tracetorch/detail/module/replay_arguments.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/detail/trace_format/tensor_files.hpp"

namespace tracetorch::detail {

/// A non-tensor slot's value: its JSON text is a string holding a repr ("True", "DynamicCache(...)").
inline PythonValue slot_python_value(const TraceSlot& slot) {
  boost::json::error_code ec;
  const auto json = boost::json::parse(slot.text, ec);
  if (!ec && json.is_string()) return python_value_from_repr(std::string_view(json.get_string()));
  return python_value_from_repr(slot.text);
}

/// A tree of values under one argument, built from the slots' locations, then closed into
/// sequences (keys 0, 1, ...) and mappings.
struct ValueTree {
  PythonValue leaf;
  bool is_leaf = false;
  std::vector<std::pair<std::string, ValueTree>> children;

  ValueTree& child(const std::string& key) {
    for (auto& [name, tree] : children) {
      if (name == key) return tree;
    }
    return children.emplace_back(key, ValueTree{}).second;
  }
  PythonValue close() && {
    if (is_leaf) return std::move(leaf);
    PythonValue out;
    out.kind = PythonValue::Kind::sequence;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].first != std::to_string(i)) out.kind = PythonValue::Kind::mapping;
    }
    for (auto& [name, tree] : children) out.items.emplace_back(name, std::move(tree).close());
    return out;
  }
};

/// The recorded inputs of `call` as a ReplayRequest: "args.N" positional, "kwargs.NAME" keywords.
inline ReplayRequest recorded_request(const Trace& trace, const TraceCall& call) {
  std::vector<std::pair<std::string, ValueTree>> arguments;  // by input key, in the call's order
  for (const auto& key : call.input_keys) arguments.emplace_back(key, ValueTree{});
  const std::string inputs = std::string(trace_format::kInputs) + trace_format::kLocationSeparator;
  for (const auto& slot : call.inputs) {
    std::string_view rest = std::string_view(slot.location).substr(inputs.size());
    ValueTree* node = nullptr;
    for (auto& [key, tree] : arguments) {
      if (rest == key || (rest.starts_with(key) && rest[key.size()] == trace_format::kLocationSeparator)) {
        node = &tree;
        rest.remove_prefix(std::min(rest.size(), key.size() + 1));
        break;
      }
    }
    if (node == nullptr) throw Error("tracetorch: " + trace.json_file.string() + ": " + slot.location + " belongs to no input");
    while (!rest.empty()) {
      const auto dot = rest.find(trace_format::kLocationSeparator);
      node = &node->child(std::string(rest.substr(0, dot)));
      rest.remove_prefix(dot == std::string_view::npos ? rest.size() : dot + 1);
    }
    node->is_leaf = true;
    node->leaf = slot.is_tensor ? PythonValue::of_tensor(load_trace_tensor(trace, slot)) : slot_python_value(slot);
  }
  ReplayRequest request;
  const std::string args = std::string(trace_format::kArgs) + trace_format::kLocationSeparator;
  for (auto& [key, tree] : arguments) {
    if (key.starts_with(args)) {
      request.args.push_back(std::move(tree).close());
    } else {
      request.kwargs.emplace_back(key.substr(std::string_view(trace_format::kKwargs).size() + 1), std::move(tree).close());
    }
  }
  return request;
}

/// Keeps a replayed call's tensors in memory, named as the debugger would name their files.
class MemoryTensorEncoder final : public TensorEncoder {
 public:
  boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix, boost::json::storage_ptr storage) override {
    std::string shape = trace_format::kShapePrefix;
    for (std::int64_t i = 0; i < tensor.dim(); ++i) shape += (i == 0 ? "" : ", ") + std::to_string(tensor.size(i));
    shape += trace_format::kShapeSuffix;
    const std::string name = prefix + "_" + std::to_string(tensors_.size()) + trace_format::kTensorFileExtension;
    tensors_[name] = tensor.detach().clone();
    boost::json::object record(storage);
    record[trace_format::kShape] = shape;
    record[trace_format::kDtype] = dtype_repr(tensor.scalar_type());
    record[trace_format::kValue] = trace_format::kTensorFilePrefix + name;
    return record;
  }
  const torch::Tensor& tensor(const TraceSlot& slot) const { return tensors_.at(std::string(trace_format::tensor_file_name(slot.file))); }
  void clear() { tensors_.clear(); }

 private:
  std::map<std::string, torch::Tensor> tensors_;
};

/// One replayed call's values, as the reader's slots (inputs or outputs of one node).
inline TraceCall slots_of(std::string_view what, const boost::json::value* inputs, const boost::json::value* outputs) {
  boost::json::object node;
  node[trace_format::kModulePath] = std::string(what);
  if (inputs != nullptr) node[trace_format::kInputs] = *inputs;
  if (outputs != nullptr) node[trace_format::kOutputs] = *outputs;
  Trace parsed = TraceParser(what).parse(boost::json::serialize(node));
  return std::move(parsed.calls.at(0));
}

}  // namespace tracetorch::detail
