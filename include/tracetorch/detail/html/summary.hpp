#pragma once
/// \file
/// The summary of a diff report in the HTML report: the verdict, the first divergence, the
/// differences counted by kind (whatever kinds the report lists), the other counts, accept rules
/// and the differences they accepted, notes, and the worst modules.

#include <boost/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/module_tree.hpp"
#include "tracetorch/detail/html/report_view.hpp"

namespace tracetorch::detail::html {

/// A table of cells that are markup already (escape text with escaped()); `row_classes` may be empty.
inline void append_table(std::string& out, const std::vector<std::string>& columns, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<std::string>& row_classes = {}) {
  out += "<table><thead><tr>";
  for (const auto& c : columns) out += "<th>" + escaped(c) + "</th>";
  out += "</tr></thead><tbody>";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += i < row_classes.size() ? "<tr class=\"s-" + row_classes[i] + "\">" : "<tr>";
    for (const auto& cell : rows[i]) out += "<td>" + cell + "</td>";
    out += "</tr>";
  }
  out += "</tbody></table>";
}

/// `text` linking to the tree node of `path` (the script opens the nodes above it), or plain text.
inline std::string node_link(const ModuleTree& tree, const std::string& path, const std::string& text) {
  const auto node = tree.find(path);
  if (!node) return escaped(text);
  return "<a href=\"#" + ModuleTree::id(*node) + "\">" + escaped(text) + "</a>";
}

/// The verdict line and the first divergence.
inline void append_verdict(std::string& out, const boost::json::value& report, const ModuleTree& tree) {
  const auto* differences = field(report, "differences");
  const bool within = flag_of(report, "within_tolerance");
  const std::string not_accepted = differences ? text_of(*differences, "not_accepted") : "";
  out += within ? "<p class=\"verdict s-ok\">Within tolerance" : "<p class=\"verdict s-diverges\">Diverges";
  if (!within && !not_accepted.empty()) out += ": " + escaped(not_accepted) + " differences not accepted";
  out += "</p>";
  out += "<dl class=\"facts\">";
  for (const char* key : {"reference", "candidate", "atol", "rtol", "reference_values", "candidate_values"}) {
    if (field(report, key) == nullptr) continue;
    out += "<dt>" + std::string(key) + "</dt><dd>" + escaped(text_of(report, key)) + "</dd>";
  }
  out += "</dl>";
  const auto* first = field(report, "first_divergence");
  if (first == nullptr || !first->is_object()) return;
  const std::string path = text_of(*first, "module_path");
  const auto call = integer_of(*first, "call", 1);
  out += "<p class=\"first\">First divergence: " + node_link(tree, path, path) + " " + escaped(text_of(*first, "location")) +
         (call > 1 ? " (call " + std::to_string(call) + ")" : "") + ": " + escaped(text_of(*first, "status")) + "</p>";
}

/// Every kind the report's `by_kind` lists, and every other count of its `differences`.
inline void append_counts(std::string& out, const boost::json::value& report) {
  const auto* differences = field(report, "differences");
  if (differences == nullptr || !differences->is_object()) return;
  std::vector<std::vector<std::string>> kinds, others;
  std::vector<std::string> kind_classes;
  if (const auto* by_kind = field(*differences, "by_kind"); by_kind && by_kind->is_object()) {
    for (const auto& entry : by_kind->get_object()) {
      kinds.push_back({escaped(entry.key()), escaped(text_of(*by_kind, entry.key()))});
      kind_classes.push_back(integer_of(*by_kind, entry.key()) > 0 ? "count" : "zero");
    }
  }
  for (const auto& entry : differences->get_object()) {
    if (entry.key() != "by_kind") others.push_back({escaped(entry.key()), escaped(text_of(*differences, entry.key()))});
  }
  out += "<div class=\"counts\"><div><h3>Differences by kind</h3>";
  append_table(out, {"kind", "count"}, kinds, kind_classes);
  out += "</div><div><h3>Other counts</h3>";
  append_table(out, {"count", "value"}, others);
  out += "</div></div>";
}

/// The accept rules (stale ones marked) and the differences they accepted, at most `limit` listed.
inline void append_accepted(std::string& out, const boost::json::value& report, const ModuleTree& tree, std::size_t limit = 200) {
  std::vector<std::vector<std::string>> rules, accepted;
  std::vector<std::string> rule_classes;
  for (const auto& rule : array_of(report, "rules")) {
    rules.push_back({escaped(text_of(rule, "origin")), escaped(text_of(rule, "pattern")), escaped(text_of(rule, "kind")),
                     escaped(text_of(rule, "reason")), escaped(text_of(rule, "matched")), flag_of(rule, "stale") ? "stale" : ""});
    rule_classes.push_back(flag_of(rule, "stale") ? "note" : "accepted");
  }
  std::size_t total = 0;
  for (const char* list : {"tensors", "missing_calls"}) {
    for (const auto& v : array_of(report, list)) {
      const auto* a = field(v, "accepted");
      if (a == nullptr || !a->is_object() || ++total > limit) continue;
      const std::string path = text_of(v, "module_path");
      accepted.push_back({node_link(tree, path, path), escaped(text_of(v, "location")), escaped(text_of(v, "kind")),
                          escaped(text_of(*a, "rule")), escaped(text_of(*a, "reason"))});
    }
  }
  if (rules.empty() && total == 0) return;
  out += "<h3>Accepted differences (" + std::to_string(total) + ")</h3>";
  if (!rules.empty()) append_table(out, {"rule", "pattern", "kind", "reason", "matched", ""}, rules, rule_classes);
  if (!accepted.empty()) append_table(out, {"module", "value", "kind", "rule", "reason"}, accepted);
  if (total > limit) out += "<p>and " + std::to_string(total - limit) + " more (in the module tree)</p>";
}

/// The report's notes, and the modules that diverge most (the report ranks them), at most `limit`.
inline void append_notes_and_worst(std::string& out, const boost::json::value& report, const ModuleTree& tree, std::size_t limit = 10) {
  if (!array_of(report, "notes").empty()) {
    out += "<h3>Notes</h3><ul>";
    for (const auto& note : array_of(report, "notes")) out += "<li>" + escaped(note.is_string() ? std::string(note.get_string()) : boost::json::serialize(note)) + "</li>";
    out += "</ul>";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : array_of(report, "modules")) {
    const bool diverges = integer_of(m, "diverging") + integer_of(m, "calls_only_in_reference") + integer_of(m, "calls_only_in_candidate") > 0;
    if (!diverges || rows.size() == limit) continue;
    const std::string path = text_of(m, "module_path");
    rows.push_back({node_link(tree, path, path), escaped(text_of(m, "diverging")), escaped(text_of(m, "max_abs_error")),
                    escaped(text_of(m, "max_rel_error")), escaped(text_of(m, "min_cosine_similarity")), escaped(text_of(m, "note"))});
  }
  if (rows.empty()) return;
  out += "<h3>Worst modules</h3>";
  append_table(out, {"module", "diverging values", "max abs", "max rel", "min cosine", "note"}, rows,
               std::vector<std::string>(rows.size(), "diverges"));
}

inline std::string diff_summary_html(const boost::json::value& report, const ModuleTree& tree) {
  std::string out = "<section id=\"summary\"><h2>Summary</h2>";
  append_verdict(out, report, tree);
  append_counts(out, report);
  append_accepted(out, report, tree);
  append_notes_and_worst(out, report, tree);
  out += "</section>";
  return out;
}

}  // namespace tracetorch::detail::html
