#pragma once
/// \file
/// The module tree of the HTML report: one <details> per module path, nested under the longest
/// recorded path it extends (`M.layers.0` under `M` when `M.layers`, a ModuleList, is never
/// called), coloured by the worst state of its calls. A node's values are not in the markup:
/// the page's script builds their table when the node is first opened, which keeps the page
/// light for traces of thousands of values.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/report_view.hpp"

namespace tracetorch::detail::html {

struct TreeNode {
  std::string path, label;  ///< label: the path less its parent's, "layers.0"
  std::optional<std::size_t> parent;
  std::vector<std::size_t> children;
  State state = State::ok;
  std::size_t calls = 0;
  std::optional<double> max_abs, max_rel;
  std::size_t diverging_below = 0;  ///< diverging nodes among its descendants
  bool open = false;                ///< on the way to the first divergence
  bool target = false;              ///< the first divergence's node: its values shown too
  std::size_t values = 0;           ///< rows for its table in the page's data
  std::optional<State> replay;      ///< the worst replay status of its calls, when a replay is shown
};

struct ModuleTree {
  std::vector<TreeNode> nodes;  ///< in order of first call
  std::map<std::string, std::size_t> by_path;
  std::vector<std::size_t> roots;

  static std::string id(std::size_t node) { return std::string("m") + std::to_string(node); }
  /// The node of a module path, if the tree has it.
  std::optional<std::size_t> find(const std::string& path) const {
    const auto it = by_path.find(path);
    return it == by_path.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }
};

/// The longest proper prefix of `path` that ends before a '.' and is a node, if any.
inline std::optional<std::size_t> parent_node(const ModuleTree& tree, const std::string& path) {
  for (auto dot = path.rfind('.'); dot != std::string::npos && dot > 0; dot = path.rfind('.', dot - 1)) {
    if (auto found = tree.find(path.substr(0, dot))) return found;
  }
  return std::nullopt;
}

/// The tree of the calls' module paths, each node summing up its calls.
inline ModuleTree build_tree(const std::vector<CallPoint>& calls) {
  ModuleTree tree;
  for (const auto& call : calls) {
    auto [it, inserted] = tree.by_path.emplace(call.path, tree.nodes.size());
    if (inserted) tree.nodes.push_back({call.path, call.path});
    TreeNode& node = tree.nodes[it->second];
    ++node.calls;
    node.state = std::max(node.state, call.state);
    keep_worst(node.max_abs, call.max_abs);
    keep_worst(node.max_rel, call.max_rel);
  }
  for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
    TreeNode& node = tree.nodes[i];
    node.parent = parent_node(tree, node.path);
    if (!node.parent) {
      tree.roots.push_back(i);
      continue;
    }
    tree.nodes[*node.parent].children.push_back(i);
    node.label = node.path.substr(tree.nodes[*node.parent].path.size() + 1);
    if (node.state != State::diverges) continue;
    for (auto up = node.parent; up; up = tree.nodes[*up].parent) ++tree.nodes[*up].diverging_below;
  }
  return tree;
}

/// Opens the node of `path` with its values, and every node above it.
inline void open_path_to(ModuleTree& tree, const std::string& path) {
  const auto target = tree.find(path);
  if (target) tree.nodes[*target].target = true;
  for (auto node = target; node; node = tree.nodes[*node].parent) tree.nodes[*node].open = true;
}

inline const char* replay_label(State s) {
  switch (s) {
    case State::ok: return "replay: match";
    case State::diverges: return "replay: diverges";
    case State::not_replayable: return "replay: not replayable";
    default: return "replay: other";
  }
}

/// One node's <summary> line: its dot, name, call count, worst errors and what lies below.
inline void append_node_summary(std::string& out, const TreeNode& node) {
  out += "<summary><i class=\"dot\"></i><span class=\"nm\">";
  append_escaped(out, node.label);
  out += "</span>";
  if (node.calls > 1) out += "<span class=\"tag\">" + std::to_string(node.calls) + " calls</span>";
  if (node.max_abs || node.max_rel) {
    out += "<span class=\"er\">abs " + (node.max_abs ? number_text(*node.max_abs) : std::string("-")) + ", rel " +
           (node.max_rel ? number_text(*node.max_rel) : std::string("-")) + "</span>";
  }
  if (node.diverging_below > 0) out += "<span class=\"below\">" + std::to_string(node.diverging_below) + " diverging below</span>";
  if (node.replay) {
    out += "<span class=\"rp s-" + std::string(state_name(*node.replay)) + "\">" + replay_label(*node.replay) + "</span>";
  }
  out += "</summary>";
}

/// A node and its subtree; `head` names the column set of its values' table in the page's data.
inline void append_node(std::string& out, const ModuleTree& tree, std::size_t index, const std::string& head) {
  const TreeNode& node = tree.nodes[index];
  out += "<details class=\"node s-" + std::string(state_name(node.state)) + "\" id=\"" + ModuleTree::id(index) + "\" data-path=\"";
  append_escaped(out, node.path);
  out += node.open ? "\" open=\"open\">" : "\">";
  append_node_summary(out, node);
  if (node.values > 0) {
    // Its own <details>: a node opened on the way to the first divergence shows its children, not its values.
    out += std::string("<details class=\"vals\"") + (node.target ? " open=\"open\"" : "") + "><summary>" +
           std::to_string(node.values) + (node.values == 1 ? " value" : " values") + "</summary><div class=\"lazy\" data-rows=\"" +
           ModuleTree::id(index) + "\" data-head=\"" + head + "\"></div></details>";
  }
  for (const std::size_t child : node.children) append_node(out, tree, child, head);
  out += "</details>";
}

inline std::string tree_html(const ModuleTree& tree, const std::string& head) {
  std::string out = "<div id=\"tree\">";
  for (const std::size_t root : tree.roots) append_node(out, tree, root, head);
  out += "</div>";
  return out;
}

}  // namespace tracetorch::detail::html
