#pragma once
/// \file
/// A replay report as text (what the trace programs print) and as JSON (docs/reference/replay.md).

#include <boost/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "tracetorch/replay/types.hpp"

namespace tracetorch::detail {

inline std::string replay_call_name(const ReplayedCall& call) {
  return call.path + " (call " + std::to_string(call.call) + ")";
}

inline std::string replay_report_text(const ReplayReport& report, std::string_view root) {
  std::string text = "replay of " + std::string(root) + " against " + report.reference.string() + ": " +
                     std::to_string(report.calls.size()) + " calls, " + std::to_string(report.count(ReplayStatus::match)) +
                     " match, " + std::to_string(report.count(ReplayStatus::diverges)) + " diverge (" +
                     std::to_string(report.innermost_diverging().size()) + " innermost), " +
                     std::to_string(report.count(ReplayStatus::not_replayable)) + " not replayable\n";
  const auto section = [&](const char* title, auto&& select, bool details) {
    bool first = true;
    for (const auto& call : report.calls) {
      if (!select(call)) continue;
      if (first) text += title;
      first = false;
      text += "  " + replay_call_name(call) + (call.reason.empty() ? "" : ": " + call.reason) + "\n";
      if (details && !call.hint.empty()) text += "    how: " + call.hint + "\n";
      if (!call.note.empty()) text += "    note: " + call.note + "\n";
    }
  };
  section("innermost diverging calls (the module's own code differs):\n",
          [](const ReplayedCall& c) { return c.status == ReplayStatus::diverges && c.innermost; }, false);
  section("other diverging calls (a diverging call lies below each):\n",
          [](const ReplayedCall& c) { return c.status == ReplayStatus::diverges && !c.innermost; }, false);
  section("not replayable:\n", [](const ReplayedCall& c) { return c.status == ReplayStatus::not_replayable; }, true);
  bool first = true;
  for (const auto& call : report.calls) {
    for (const auto& accepted : call.accepted) {
      if (first) text += "accepted differences (reviewed rules):\n";
      first = false;
      text += "  " + replay_call_name(call) + ": " + accepted + "\n";
    }
  }
  return text;
}

/// A number for JSON: null where it is not finite (NaN in a tensor, or an error relative to 0).
inline boost::json::value json_number(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

/// The report as a JSON array of call objects, in the report's order.
inline std::string replay_report_json(const ReplayReport& report) {
  boost::json::array calls;
  for (const auto& call : report.calls) {
    boost::json::object object;
    object["path"] = call.path;
    object["call"] = call.call;
    object["status"] = replay_status_name(call.status);
    object["innermost"] = call.innermost;
    object["reason"] = call.reason;
    if (call.status == ReplayStatus::diverges) {
      object["max_abs"] = json_number(call.max_abs);
      object["max_rel"] = json_number(call.max_rel);
      object["elements_out_of_tolerance"] = call.elements_out_of_tolerance;
    }
    if (!call.hint.empty()) object["hint"] = call.hint;
    if (!call.note.empty()) object["note"] = call.note;
    if (!call.accepted.empty()) object["accepted"] = boost::json::value_from(call.accepted);
    calls.push_back(std::move(object));
  }
  return boost::json::serialize(calls) + "\n";
}

}  // namespace tracetorch::detail
