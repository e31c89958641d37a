#pragma once
/// \file
/// The HTML report as one page: the summary, the error plot, the module tree and the replay
/// section, with the data the script needs (value rows, the plot's calls) in a JSON <script>
/// block. One file, nothing fetched: it opens from disk.

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/html/assets.hpp"
#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/module_tree.hpp"
#include "tracetorch/detail/html/plot.hpp"
#include "tracetorch/detail/html/replay.hpp"
#include "tracetorch/detail/html/report_view.hpp"
#include "tracetorch/detail/html/rows.hpp"
#include "tracetorch/detail/html/summary.hpp"

namespace tracetorch::detail::html {

/// Each node's value rows (a diff's values, or without a diff the replay's calls) under the node's id.
inline boost::json::object node_rows(ModuleTree& tree, const boost::json::value* diff, const boost::json::value* replay) {
  boost::json::object rows;
  const auto add = [&](const std::string& path, boost::json::array row) {
    const auto node = tree.find(path);
    if (!node) return;
    ++tree.nodes[*node].values;
    auto& list = rows[ModuleTree::id(*node)];
    if (!list.is_array()) list = boost::json::array();
    list.get_array().push_back(std::move(row));
  };
  if (diff != nullptr) {
    for (const auto& v : array_of(*diff, "tensors")) add(text_of(v, "module_path"), diff_value_row(v));
  } else {
    for (const auto& c : replay_entries(*replay)) add(text_of(c, "path"), replay_row(c));
  }
  return rows;
}

/// The plot's calls for the script: [node id, call, max abs, max rel, state].
inline boost::json::array plot_calls(const std::vector<CallPoint>& calls, const ModuleTree& tree) {
  boost::json::array out;
  const auto text = [](const std::optional<double>& v) { return v ? number_text(*v) : std::string("-"); };
  for (const auto& c : calls) {
    out.push_back(boost::json::array{ModuleTree::id(*tree.find(c.path)), c.call, text(c.max_abs), text(c.max_rel), state_name(c.state)});
  }
  return out;
}

inline void append_plot_section(std::string& out, const std::vector<CallPoint>& calls, double atol, double rtol,
                                std::optional<std::size_t> first, bool replay) {
  out += "<section id=\"errors\"><h2>Errors along execution order</h2><p class=\"legend\">"
         "<span><i class=\"sw sw-abs\"></i>max abs error (dashed: atol)</span>"
         "<span><i class=\"sw sw-rel\"></i>max rel error (dashed: rtol)</span>"
         "<span><i class=\"sw sw-diverges\"></i>diverges</span><span><i class=\"sw sw-accepted\"></i>accepted</span>";
  if (replay) out += "<span><i class=\"sw sw-not-replayable\"></i>not replayable</span>";
  out += "</p><p class=\"legend\">A call with either point on or under its dashed line has no element out of tolerance. "
         "Hover for a call, click to open it in the tree.</p><div class=\"plot-box\">";
  out += plot_svg(calls, atol, rtol, first);
  out += "<div id=\"tip\"></div></div></section>";
}

/// The page's head and navigation.
inline void append_head(std::string& out, const std::string& title, bool has_diff, bool has_replay) {
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>";
  append_escaped(out, title);
  out += "</title><style>";
  out += kStyle;
  out += "</style></head><body><h1>";
  append_escaped(out, title);
  out += "</h1><nav>";
  if (has_diff) out += "<a href=\"#summary\">Summary</a>";
  out += "<a href=\"#errors\">Error plot</a><a href=\"#modules\">Module tree</a>";
  if (has_replay) out += "<a href=\"#replay\">Module replay</a>";
  out += "</nav>";
}

/// The data block and the script, then the end of the page.
inline void append_tail(std::string& out, boost::json::object rows, boost::json::array calls) {
  boost::json::object heads{{"values", value_columns()}};
  heads["replay"] = replay_columns();
  const boost::json::object data{{"heads", std::move(heads)},
                                 {"rows", std::move(rows)},
                                 {"calls", std::move(calls)},
                                 {"plot", {{"left", PlotFrame::left}, {"right", PlotFrame::right}, {"width", PlotFrame::width}}}};
  out += "<noscript><p>The value tables are built by the page's script: enable JavaScript to see them.</p></noscript>";
  out += "<script type=\"application/json\" id=\"tt-data\">";
  append_script_json(out, data);
  out += "</script><script>//<![CDATA[";
  out += kScript;
  out += "//]]></script></body></html>\n";
}

/// The whole page. `diff` null: a replay report alone (then `replay` is required).
inline std::string render_report(const boost::json::value& diff, const boost::json::value* replay) {
  const bool has_diff = !diff.is_null();
  if (has_diff && !diff.is_object()) throw Error("tracetorch: cannot write an HTML report: the diff report is not a JSON object");
  if (!has_diff && replay == nullptr) throw Error("tracetorch: cannot write an HTML report: neither a diff nor a replay report given");
  if (replay != nullptr) (void)replay_entries(*replay);  // throws for a replay report of another shape
  const std::vector<CallPoint> calls = has_diff ? diff_calls(diff) : replay_calls(*replay);
  ModuleTree tree = build_tree(calls);
  const auto first = first_diverging_call(has_diff ? diff : *replay, calls);
  if (first) open_path_to(tree, calls[*first].path);
  if (replay != nullptr) mark_replay(tree, *replay);
  boost::json::object rows = node_rows(tree, has_diff ? &diff : nullptr, replay);

  const bool failed = has_diff ? !flag_of(diff, "within_tolerance")
                               : std::any_of(calls.begin(), calls.end(), [](const CallPoint& c) { return c.state == State::diverges; });
  std::string out;
  out.reserve(4096 + calls.size() * 400);
  append_head(out, std::string("tracetorch ") + (has_diff ? "diff" : "replay") + (failed ? ": diverges" : ": within tolerance"),
              has_diff, replay != nullptr);
  if (has_diff) out += diff_summary_html(diff, tree);
  const double atol = has_diff ? number_of(diff, "atol").value_or(NAN) : NAN;
  const double rtol = has_diff ? number_of(diff, "rtol").value_or(NAN) : NAN;
  append_plot_section(out, calls, atol, rtol, first, replay != nullptr);
  out += "<section id=\"modules\"><h2>Module tree</h2><p><button type=\"button\" id=\"open-diverging\">open diverging</button> "
         "<button type=\"button\" id=\"close-all\">close all</button> " + std::to_string(tree.nodes.size()) + " modules, " +
         std::to_string(calls.size()) + " calls</p>";
  out += tree_html(tree, has_diff ? "values" : "replay");
  out += "</section>";
  if (replay != nullptr) out += replay_html(*replay, tree, rows);
  append_tail(out, std::move(rows), plot_calls(calls, tree));
  return out;
}

}  // namespace tracetorch::detail::html
