#pragma once
/// \file
/// The rows of the HTML report's value tables, as cells of text: a compared value of a diff
/// report, a call of a replay report. Fields a table has no column for are shown by name in its
/// last column, so a report that grows a field (a new kind's details) still shows it.

#include <boost/json.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/report_view.hpp"

namespace tracetorch::detail::html {

inline boost::json::array value_columns() {
  return {"call", "value", "status", "max abs", "max rel", "cosine", "out of tolerance", "shape", "dtype", "accepted", "more"};
}

inline boost::json::array replay_columns() {
  return {"module", "call", "status", "innermost", "max abs", "max rel", "out of tolerance", "reason", "more"};
}

/// "key=value; ..." for the fields not in `shown` that say something (not null, false or "").
inline std::string other_fields(const boost::json::value& v, std::initializer_list<std::string_view> shown) {
  std::string out;
  const auto* object = v.if_object();
  if (object == nullptr) return out;
  for (const auto& entry : *object) {
    if (std::find(shown.begin(), shown.end(), std::string_view(entry.key())) != shown.end()) continue;
    const auto& x = entry.value();
    if (x.is_null() || (x.is_bool() && !x.get_bool()) || (x.is_string() && x.get_string().empty())) continue;
    out += (out.empty() ? "" : "; ") + std::string(entry.key()) + "=" + text_of(v, entry.key());
  }
  return out;
}

inline std::string number_cell(const boost::json::value& v, std::string_view key) {
  const auto n = number_of(v, key);
  return n ? number_text(*n) : std::string();
}

/// "reference vs candidate" where they differ, else the one.
inline std::string both_sides(const boost::json::value& v, std::string_view reference_key, std::string_view candidate_key) {
  const std::string reference = text_of(v, reference_key), candidate = text_of(v, candidate_key);
  if (candidate.empty() || candidate == reference) return reference;
  return (reference.empty() ? std::string("-") : reference) + " vs " + candidate;
}

/// A diff report's value: its state first (the row's colour), then the cells of value_columns().
inline boost::json::array diff_value_row(const boost::json::value& v) {
  const std::string location = text_of(v, "location"), candidate_location = text_of(v, "candidate_location");
  const std::string kind = text_of(v, "kind");
  const auto compared = integer_of(v, "compared");
  std::string accepted;
  if (const auto* a = field(v, "accepted"); a && a->is_object()) accepted = text_of(*a, "rule") + ": " + text_of(*a, "reason");
  return {state_name(diff_value_state(v)),
          text_of(v, "call"),
          candidate_location.empty() || candidate_location == location ? location : location + " (candidate: " + candidate_location + ")",
          text_of(v, "status") + (kind.empty() ? "" : " [" + kind + "]"),
          number_cell(v, "max_abs_error"),
          number_cell(v, "max_rel_error"),
          number_cell(v, "cosine_similarity"),
          compared > 0 ? text_of(v, "out_of_tolerance") + " of " + std::to_string(compared) : std::string(),
          both_sides(v, "reference_shape", "candidate_shape"),
          both_sides(v, "reference_dtype", "candidate_dtype"),
          accepted,
          other_fields(v, {"module_path", "call", "location", "candidate_location", "status", "kind", "max_abs_error",
                           "max_rel_error", "cosine_similarity", "compared", "out_of_tolerance", "reference_shape",
                           "candidate_shape", "reference_dtype", "candidate_dtype", "accepted", "is_tensor"})};
}

/// A replay report's call: its state, then the cells of replay_columns().
inline boost::json::array replay_row(const boost::json::value& c) {
  const auto out_of_tolerance = field(c, "elements_out_of_tolerance");
  return {state_name(replay_state(c)),
          text_of(c, "path"),
          text_of(c, "call"),
          text_of(c, "status"),
          flag_of(c, "innermost") ? "innermost" : "",
          number_cell(c, "max_abs"),
          number_cell(c, "max_rel"),
          out_of_tolerance ? text_of(c, "elements_out_of_tolerance") : std::string(),
          text_of(c, "reason"),
          other_fields(c, {"path", "call", "status", "innermost", "max_abs", "max_rel", "elements_out_of_tolerance", "reason"})};
}

}  // namespace tracetorch::detail::html
