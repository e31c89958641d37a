// tracetorch/debugger.hpp's do_prune_layers (detail/debugger/trace_tree.hpp): a pruned trace is
// the unpruned trace with its middle layer blocks removed, by transformers' rule, at every depth
// (blocks within blocks), with leaves whose paths end in a number, failing blocks, and outputs
// written in place after their block returned.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "test_helpers.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using tracetorch_test::read_json;
using tracetorch_test::TempDir;

/// transformers' rule, on a trace's JSON: a layer block is a path ending in ".<n>" with a child
/// whose path holds ".<n>."; among each node's children the first and last block stay.
bool json_layer_block(const boost::json::object& node) {
  const std::string path(node.at("module_path").as_string());
  std::size_t digits = 0;
  while (digits < path.size() && std::isdigit(static_cast<unsigned char>(path[path.size() - 1 - digits]))) ++digits;
  if (digits == 0 || digits == path.size() || path[path.size() - 1 - digits] != '.' || !node.contains("children")) return false;
  const std::string needle = "." + path.substr(path.size() - digits) + ".";
  for (const auto& child : node.at("children").as_array()) {
    if (std::string(child.as_object().at("module_path").as_string()).find(needle) != std::string::npos) return true;
  }
  return false;
}

void prune_json(boost::json::object& node) {
  if (!node.contains("children")) return;
  auto& children = node.at("children").as_array();
  std::vector<std::size_t> blocks;
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (json_layer_block(children[i].as_object())) blocks.push_back(i);
  }
  if (blocks.size() > 2) {
    boost::json::array kept;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (i == blocks.front() || i == blocks.back() || std::find(blocks.begin(), blocks.end(), i) == blocks.end()) {
        kept.push_back(children[i]);
      }
    }
    children = std::move(kept);
  }
  for (auto& child : children) prune_json(child.as_object());
}

/// A block within a block (a MoE's expert within its layer).
struct PrunedExpertImpl : torch::nn::Module {
  PrunedExpertImpl() { act = register_module("act", tracetorch::nn::Tanh()); }
  torch::Tensor forward(const torch::Tensor& x) { return act(x) * 0.5; }
  tracetorch::nn::Tanh act{nullptr};
};
TRACETORCH_TRACEABLE_IMPL(PrunedExpert, PrunedExpertImpl);

/// A block: tanh, three experts, sigmoid; or a failure where asked.
struct PrunedBlockImpl : torch::nn::Module {
  PrunedBlockImpl() {
    act = register_module("act", tracetorch::nn::Tanh());
    experts = register_module("experts", torch::nn::ModuleList());
    for (int i = 0; i < 3; ++i) experts->push_back(PrunedExpert());
    gate = register_module("gate", tracetorch::nn::Sigmoid());
  }
  torch::Tensor forward(const torch::Tensor& x) {
    if (fail) throw std::runtime_error("block failed");
    auto h = act(x);
    for (std::size_t i = 0; i < experts->size(); ++i) h = h + (*experts)[i]->as<PrunedExpert>()->forward(h);
    return gate(h) + x;
  }
  tracetorch::nn::Tanh act{nullptr};
  torch::nn::ModuleList experts{nullptr};
  tracetorch::nn::Sigmoid gate{nullptr};
  bool fail = false;
};
TRACETORCH_TRACEABLE_IMPL(PrunedBlock, PrunedBlockImpl);

/// Blocks holding blocks (a MoE's experts inside its layers), leaves that end in ".<n>" (no
/// blocks), and what a model may do to a block's output after it returns.
struct PrunedStackImpl : torch::nn::Module {
  explicit PrunedStackImpl(int layers) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < layers; ++i) blocks->push_back(PrunedBlock());
    leaves = register_module("leaves", torch::nn::ModuleList());
    for (int i = 0; i < 3; ++i) leaves->push_back(tracetorch::nn::Tanh());
    norm = register_module("norm", tracetorch::nn::Sigmoid());
  }
  torch::Tensor forward(torch::Tensor h) {
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      try {
        h = (*blocks)[i]->as<PrunedBlock>()->forward(h);
      } catch (const std::runtime_error&) {
        DOCTEST_CHECK((*blocks)[i]->as<PrunedBlockImpl>()->fail);
      }
      if (write_after_block) h.add_(1);  // in place: the block's recorded output is from before
    }
    for (std::size_t i = 0; i < leaves->size(); ++i) h = (*leaves)[i]->as<tracetorch::nn::Tanh>()->forward(h);
    return norm(h);
  }
  torch::nn::ModuleList blocks{nullptr}, leaves{nullptr};
  tracetorch::nn::Sigmoid norm{nullptr};
  bool write_after_block = false;
};
TRACETORCH_TRACEABLE_IMPL(PrunedStack, PrunedStackImpl);

/// The two JSON files of a use_repr trace of `model` on `x`, with prune_layers or without.
std::vector<boost::json::value> trace_files(PrunedStack& model, const torch::Tensor& x, bool prune, int forwards = 1) {
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = prune});
    for (int i = 0; i < forwards; ++i) model(x.clone());
  }
  return {read_json(dir / "PrunedStack_debug_tree_FULL_TENSORS.json"), read_json(dir / "PrunedStack_debug_tree_SUMMARY.json")};
}

void check_pruned_equals_unpruned(PrunedStack& model, const torch::Tensor& x, int forwards = 1) {
  const auto pruned = trace_files(model, x, true, forwards);
  auto expected = trace_files(model, x, false, forwards);
  for (std::size_t file = 0; file < 2; ++file) {
    DOCTEST_INFO("file " << file);
    prune_json(expected[file].as_object());
    DOCTEST_CHECK(boost::json::serialize(pruned[file]) == boost::json::serialize(expected[file]));
  }
}

}  // namespace

DOCTEST_TEST_SUITE("debugger") {

DOCTEST_TEST_CASE("prune_layers: the trace is the unpruned trace without its middle blocks") {
  for (const int layers : {1, 2, 3, 6}) {
    DOCTEST_INFO("layers " << layers);
    PrunedStack model(layers);
    check_pruned_equals_unpruned(model, torch::randn({2, 5}));
    const auto pruned = trace_files(model, torch::randn({2, 5}), true);
    const auto& children = pruned[0].as_object().at("children").as_array();
    std::vector<std::string> paths;
    for (const auto& child : children) paths.emplace_back(child.as_object().at("module_path").as_string());
    DOCTEST_CHECK(paths.size() == static_cast<std::size_t>(std::min(layers, 2)) + 4);  // blocks, 3 leaves, norm
    DOCTEST_CHECK(paths.back() == "PrunedStack.norm");
    if (layers > 1) DOCTEST_CHECK(paths[1] == "PrunedStack.blocks." + std::to_string(layers - 1));
  }
}

DOCTEST_TEST_CASE("prune_layers: a block's output written in place after it returns is recorded as it was returned") {
  PrunedStack model(4);
  model->write_after_block = true;
  check_pruned_equals_unpruned(model, torch::randn({3, 4}), 2);
}

DOCTEST_TEST_CASE("prune_layers: a block that fails leaves no node, the blocks around it are kept or pruned as transformers does") {
  for (const int failing : {0, 1, 3}) {
    DOCTEST_INFO("failing block " << failing);
    PrunedStack model(4);
    (*model->blocks)[failing]->as<PrunedBlockImpl>()->fail = true;
    check_pruned_equals_unpruned(model, torch::randn({2, 3}));
  }
}

}  // DOCTEST_TEST_SUITE
