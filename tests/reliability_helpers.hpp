#pragma once
// Shared by the tests/test_reliability_*.cpp files (issue 8, docs/reliability.md): the toy modules
// the faults are injected into (Echo; Outer -> block -> {a, b} -> lin, and head) and the files one
// trace writes.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "test_helpers.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

// A named namespace around the reliability tests: their toy modules (Leaf, Block, ...) keep their
// short names when the test files are compiled together (unity build).
namespace reliability_test {

using tracetorch_test::data_dir;
using tracetorch_test::dtype_named;
using tracetorch_test::from_hex;
using tracetorch_test::int_list;
using tracetorch_test::read_file;
using tracetorch_test::module_paths;
using tracetorch_test::read_json;
using tracetorch_test::snapshot;
using tracetorch_test::TempDir;

// ---------------------------------------------------------------------------------------------
// Models

/// Returns its input: one tensor seen as the root's input and a leaf's input and output.
struct EchoImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
TRACEABLE(Echo);

/// A leaf that can be told to throw after doing its work.
struct LeafImpl : torch::nn::Module {
  LeafImpl() { lin = register_module("lin", tracetorch::nn::Linear(4, 4)); }
  torch::Tensor forward(torch::Tensor x) {
    auto y = lin(x);
    if (fail || (fail_on_call && ++calls == *fail_on_call)) throw std::runtime_error("leaf failed");
    return y;
  }
  tracetorch::nn::Linear lin{nullptr};
  bool fail = false;
  std::optional<int> fail_on_call;  // fail the n-th call only
  int calls = 0;
};
TRACEABLE(Leaf);

struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    a = register_module("a", Leaf());
    b = register_module("b", Leaf());
  }
  torch::Tensor forward(torch::Tensor x) { return b(a(x)); }
  Leaf a{nullptr}, b{nullptr};
};
TRACEABLE(Block);

/// Outer -> block -> {a, b} -> lin, and head: three levels, seven traced modules.
struct OuterImpl : torch::nn::Module {
  OuterImpl() {
    block = register_module("block", Block());
    head = register_module("head", tracetorch::nn::Linear(4, 2));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = block(x);
    if (catch_block_failure) {
      // A model that recovers from a failing submodule: the trace goes on without that call.
      try {
        y = block(y);
      } catch (const std::runtime_error&) {
      }
    }
    return head(y);
  }
  Block block{nullptr};
  tracetorch::nn::Linear head{nullptr};
  bool catch_block_failure = false;
};
TRACEABLE(Outer);

inline Outer make_outer() {
  torch::manual_seed(8);
  Outer model;
  model->eval();
  return model;
}

inline torch::Tensor outer_input(double offset = 0.0) {
  return (torch::arange(8, torch::kFloat).reshape({2, 4}) * 0.25 - 1.0 + offset);
}

// ---------------------------------------------------------------------------------------------
// Files

inline std::set<std::string> names_of(const std::map<std::string, std::string>& files) {
  std::set<std::string> out;
  for (const auto& [name, content] : files) out.insert(name);
  return out;
}

/// The files one trace of `model` writes into a fresh directory.
template <class Model, class Input>
std::map<std::string, std::string> trace_files(Model& model, const Input& input, bool use_repr) {
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(input);
  }
  return snapshot(dir.path());
}

/// Every "./file" reference in a FULL_TENSORS tree.
inline void file_references(const boost::json::value& value, std::vector<std::string>& out) {
  if (value.is_object()) {
    for (const auto& e : value.as_object()) file_references(e.value(), out);
  } else if (value.is_array()) {
    for (const auto& e : value.as_array()) file_references(e, out);
  } else if (value.is_string() && value.as_string().starts_with("./")) {
    out.emplace_back(value.as_string().subview(2));
  }
}

inline bool all_parameters_equal(torch::nn::Module& a, const std::vector<torch::Tensor>& saved) {
  const auto now = a.parameters();
  if (now.size() != saved.size()) return false;
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (!torch::equal(now[i], saved[i])) return false;
  }
  return true;
}

inline std::vector<torch::Tensor> copy_parameters(torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.parameters()) out.push_back(p.detach().clone());
  return out;
}

inline std::size_t attached_modules(torch::nn::Module& model) {
  std::size_t n = 0;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      n += traced->attachments_.load() != nullptr ? 1 : 0;
    }
  }
  return n;
}

}  // namespace reliability_test
