#pragma once
/// \file
/// The nested call tree of one traced forward: built call by call as the modules enter and
/// return, pruned of middle layer blocks, and written out as Python's `json.dump(indent=2)`.

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <map>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/detail/debugger/call_json.hpp"
#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/text/python_json.hpp"

namespace tracetorch::detail {

/// One module call, as transformers' debugger records it. Its strings, children and JSON
/// values live in one forward's arena (forward_memory.hpp).
struct CallNode {
  CallNode(std::string_view path, ForwardArena& memory)
      : module_path(path, &memory), inputs(memory.json_storage()), children(&memory) {}

  std::pmr::string module_path;
  boost::json::object inputs;
  std::optional<boost::json::value> outputs;  // nullopt: no "outputs" key
  std::pmr::vector<CallNode> children;
  std::size_t files_before = 0;  // tensor files the forward had written when this call began
};

inline bool is_layer_block(const CallNode& node) {
  // Python: re.match(r"(.*)\.(\d+)$", path) and a child path containing ".<number>.".
  const std::string_view path = node.module_path;
  std::size_t digits = 0;
  while (digits < path.size() && std::isdigit(static_cast<unsigned char>(path[path.size() - 1 - digits]))) ++digits;
  if (digits == 0 || digits == path.size() || path[path.size() - 1 - digits] != '.') return false;
  if (node.children.empty()) return false;
  const std::string needle = "." + std::string(path.substr(path.size() - digits)) + ".";
  for (const auto& child : node.children) {
    if (child.module_path.find(needle) != std::string::npos) return true;
  }
  return false;
}

/// Keeps the first and last layer block among each node's children.
inline void prune_intermediate_layers(CallNode& node) {
  if (node.children.empty()) return;
  std::vector<std::size_t> blocks;
  for (std::size_t i = 0; i < node.children.size(); ++i) {
    if (is_layer_block(node.children[i])) blocks.push_back(i);
  }
  if (blocks.size() > 2) {
    std::pmr::vector<CallNode> kept(node.children.get_allocator());
    kept.reserve(node.children.size() - blocks.size() + 2);
    for (std::size_t i = 0; i < node.children.size(); ++i) {
      const bool middle_block = std::find(blocks.begin() + 1, blocks.end() - 1, i) != blocks.end() - 1;
      if (!middle_block) kept.push_back(std::move(node.children[i]));
    }
    node.children = std::move(kept);
  }
  for (auto& child : node.children) prune_intermediate_layers(child);
}

/// Python's truth value of a JSON value: the root keeps its outputs only where they are truthy.
inline bool is_truthy(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null: return false;
    case boost::json::kind::array: return !value.get_array().empty();
    case boost::json::kind::object: return !value.get_object().empty();
    case boost::json::kind::string: return !value.get_string().empty();
    default: return true;
  }
}

/// `depth` levels of `json.dump(indent=2)` indentation on a new line.
inline void append_new_line(std::string& out, int depth) {
  out += '\n';
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
}

/// A node as `json.dump(indent=2)` writes it; outputs only on leaves (prune_outputs_if_children).
/// `drain(out)` runs after each child, so the caller can pass the text on in pieces.
template <class Drain>
void append_call_node(std::string& out, const CallNode& node, int depth, bool strip_values, Drain& drain) {
  const auto key = [&](std::string_view name) {
    append_new_line(out, depth + 1);
    append_json_string(out, name);
    out += ": ";
  };
  out += '{';
  key(trace_format::kModulePath);
  append_json_string(out, node.module_path);
  out += ',';
  key(trace_format::kInputs);
  append_python_json(out, node.inputs, depth + 1, strip_values);
  if (node.children.empty()) {
    if (node.outputs) {
      out += ',';
      key(trace_format::kOutputs);
      append_python_json(out, *node.outputs, depth + 1, strip_values);
    }
  } else {
    out += ',';
    key(trace_format::kChildren);
    out += '[';
    bool first = true;
    for (const auto& child : node.children) {
      if (!first) out += ',';
      first = false;
      append_new_line(out, depth + 2);
      append_call_node(out, child, depth + 2, strip_values, drain);
      drain(out);
    }
    append_new_line(out, depth + 1);
    out += ']';
  }
  append_new_line(out, depth);
  out += '}';
}

/// The calls of one forward: a stack of the calls still running, each holding the calls it made
/// that have returned. All of it lives in the forward's arena.
class CallTree {
 public:
  /// Tensors in the calls' inputs and outputs go to `encoder`.
  CallTree(ForwardArena& memory, TensorEncoder& encoder, bool number_repeated_calls = true)
      : memory_(memory),
        encoder_(encoder),
        number_repeated_calls_(number_repeated_calls),
        running_(&memory),
        call_counts_(&memory) {}

  /// Starts a call of `at`, recorded under `path` with its arguments; the root's inputs keep
  /// "args" and "kwargs" even when empty. `files_before`: the tensor files written so far. The
  /// call counts even where its arguments throw (then no call is started).
  void enter(const Attachment& at, std::string_view path, const CallArgs& args, bool root, std::size_t files_before) {
    CallNode node(path, memory_);
    node.files_before = files_before;
    ++call_counts_[&at];
    TraceJsonBuilder inputs(file_stem(at, node, trace_format::kInputsStem), encoder_, memory_.json_storage());
    args.visit(inputs);
    node.inputs = inputs.take_arguments(/*keep_empty=*/root);
    running_.push_back(std::move(node));
  }

  /// The innermost running call.
  const CallNode& innermost() const { return running_.back(); }
  bool empty() const noexcept { return running_.empty(); }

  /// Ends the innermost call with `result` and files it under its caller. A module with children
  /// keeps no outputs. Where the result throws, the call is gone already: the caller's unwind
  /// then drops the caller, not this call a second time.
  void exit(const Attachment& at, const CallResult& result) {
    CallNode node = std::move(running_.back());
    running_.pop_back();
    if (at.has_children) {
      node.outputs.emplace(nullptr, memory_.json_storage());
    } else {
      TraceJsonBuilder outputs(file_stem(at, node, trace_format::kOutputsStem), encoder_, memory_.json_storage());
      result.visit(outputs);
      node.outputs = outputs.take_value();
    }
    running_.back().children.push_back(std::move(node));
  }

  /// Drops the innermost call: it threw.
  void drop_innermost() { running_.pop_back(); }

  /// Ends the root call with `result`: the whole tree, its middle layer blocks pruned where
  /// `prune_layers`. The root's file stem is `root_name`.
  CallNode finish(std::string_view root_name, const CallResult& result, bool prune_layers) {
    CallNode root = std::move(running_.back());
    running_.pop_back();
    std::string stem(root_name);
    stem += trace_format::kOutputsStem;
    TraceJsonBuilder builder(std::move(stem), encoder_, memory_.json_storage());
    result.visit(builder);
    boost::json::value outputs = builder.take_value();
    if (is_truthy(outputs)) root.outputs = std::move(outputs);  // the root drops falsy keys
    if (prune_layers) prune_intermediate_layers(root);
    return root;
  }

  /// Whether `at` was called in this forward.
  bool called(const Attachment& at) const { return call_counts_.contains(&at); }

 private:
  /// transformers' file stem is the module path; a module called again in the same forward
  /// gets `_call<N>` so that no call's tensors overwrite another's, unless the names are to be
  /// transformers' own (the later call's file then replaces the earlier). Then `suffix`.
  std::string file_stem(const Attachment& at, const CallNode& node, std::string_view suffix) const {
    const auto found = call_counts_.find(&at);
    const int call = found == call_counts_.end() ? 1 : found->second;
    std::string stem(node.module_path);
    if (call > 1 && number_repeated_calls_) {
      stem += trace_format::kCallStem;
      stem += std::to_string(call);
    }
    stem += suffix;
    return stem;
  }

  ForwardArena& memory_;
  TensorEncoder& encoder_;
  bool number_repeated_calls_;
  std::pmr::vector<CallNode> running_;
  std::pmr::map<const Attachment*, int> call_counts_;
};

}  // namespace tracetorch::detail
