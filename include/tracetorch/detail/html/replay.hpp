#pragma once
/// \file
/// The replay section of the HTML report: a module replay's calls (each `path`, `call`,
/// `status` match / diverges / not_replayable, `innermost`, `reason`, and for diverging calls
/// `max_abs`, `max_rel`, `elements_out_of_tolerance`) counted by status, the diverging ones
/// listed innermost first (a diverging leaf explains its parents), those that could not be
/// replayed with their reasons, and the rest in a table built when opened.

#include <boost/json.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/module_tree.hpp"
#include "tracetorch/detail/html/report_view.hpp"
#include "tracetorch/detail/html/rows.hpp"
#include "tracetorch/detail/html/summary.hpp"

namespace tracetorch::detail::html {

/// Gives each tree node the worst replay state of its calls.
inline void mark_replay(ModuleTree& tree, const boost::json::value& replay) {
  for (const auto& entry : replay_entries(replay)) {
    const auto node = tree.find(text_of(entry, "path"));
    if (!node) continue;
    auto& state = tree.nodes[*node].replay;
    state = std::max(state.value_or(State::ok), replay_state(entry));
  }
}

/// "12 calls: 9 match, 2 diverges (1 innermost), 1 not_replayable", statuses as the report spells them.
inline std::string replay_counts(const boost::json::array& entries) {
  std::map<std::string, std::size_t> by_status;
  std::vector<std::string> order;
  std::size_t innermost = 0;
  for (const auto& entry : entries) {
    const std::string status = text_of(entry, "status");
    if (by_status[status]++ == 0) order.push_back(status);
    innermost += replay_state(entry) == State::diverges && flag_of(entry, "innermost") ? 1 : 0;
  }
  std::string out = std::to_string(entries.size()) + (entries.size() == 1 ? " call" : " calls");
  for (std::size_t i = 0; i < order.size(); ++i) {
    out += (i == 0 ? ": " : ", ") + std::to_string(by_status[order[i]]) + " " + order[i];
    if (order[i] == "diverges" && innermost > 0) out += " (" + std::to_string(innermost) + " innermost)";
  }
  return out;
}

/// A static table of replay calls, the module cell linking to the tree.
inline void append_replay_table(std::string& out, const std::vector<const boost::json::value*>& calls, const ModuleTree& tree) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> classes;
  std::vector<std::string> columns;
  for (const auto& c : replay_columns()) columns.emplace_back(c.get_string());
  for (const auto* call : calls) {
    const auto row = replay_row(*call);
    std::vector<std::string> cells;
    for (std::size_t i = 1; i < row.size(); ++i) cells.push_back(escaped(row[i].get_string()));
    const std::string path = text_of(*call, "path");
    cells[0] = node_link(tree, path, path);
    rows.push_back(std::move(cells));
    classes.emplace_back(row[0].get_string());
  }
  append_table(out, columns, rows, classes);
}

/// The section; the calls neither diverging nor unreplayable go to `rows["replay-other"]` for the script.
inline std::string replay_html(const boost::json::value& replay, const ModuleTree& tree, boost::json::object& rows) {
  const auto& entries = replay_entries(replay);
  std::vector<const boost::json::value*> diverging, unreplayable;
  boost::json::array other;
  for (const auto& entry : entries) {
    const State state = replay_state(entry);
    if (state == State::diverges) diverging.push_back(&entry);
    else if (state == State::not_replayable) unreplayable.push_back(&entry);
    else other.push_back(replay_row(entry));
  }
  std::stable_partition(diverging.begin(), diverging.end(), [](const boost::json::value* c) { return flag_of(*c, "innermost"); });
  const bool any_diverges = !diverging.empty();
  std::string out = "<section id=\"replay\"><h2>Module replay</h2><p class=\"verdict s-";
  out += std::string(any_diverges ? "diverges" : "ok") + "\">" + escaped(replay_counts(entries)) + "</p>";
  if (any_diverges) {
    out += "<h3>Diverging calls, innermost first</h3>";
    append_replay_table(out, diverging, tree);
  }
  if (!unreplayable.empty()) {
    out += std::string("<details class=\"group\"") + (unreplayable.size() <= 20 ? " open=\"open\"" : "") +
           "><summary>Not replayable (" + std::to_string(unreplayable.size()) + ")</summary>";
    append_replay_table(out, unreplayable, tree);
    out += "</details>";
  }
  if (!other.empty()) {
    out += "<details class=\"group\"><summary>Other calls (" + std::to_string(other.size()) +
           ")</summary><div class=\"lazy\" data-rows=\"replay-other\" data-head=\"replay\"></div></details>";
    rows["replay-other"] = std::move(other);
  }
  out += "</section>";
  return out;
}

}  // namespace tracetorch::detail::html
