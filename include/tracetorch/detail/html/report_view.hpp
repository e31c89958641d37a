#pragma once
/// \file
/// What the HTML report reads from a JSON report: fields by name, tolerant of absent ones (the
/// page also serves reports of other shapes and later versions), each value's state, and the
/// module calls in execution order with their worst errors (the plot's points).

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/html/markup.hpp"

namespace tracetorch::detail::html {

inline const boost::json::value* field(const boost::json::value& v, std::string_view key) {
  const auto* object = v.if_object();
  return object ? object->if_contains(key) : nullptr;
}

/// A field as text: a string as is, a number as the tables write it, true/false; "" when absent or null.
inline std::string text_of(const boost::json::value& v, std::string_view key) {
  const auto* f = field(v, key);
  if (f == nullptr || f->is_null()) return "";
  if (const auto* s = f->if_string()) return std::string(*s);
  if (f->is_bool()) return f->get_bool() ? "true" : "false";
  if (f->is_int64()) return std::to_string(f->get_int64());
  if (f->is_uint64()) return std::to_string(f->get_uint64());
  if (f->is_double()) return number_text(f->get_double());
  return boost::json::serialize(*f);
}

inline std::optional<double> number_of(const boost::json::value& v, std::string_view key) {
  const auto* f = field(v, key);
  return f ? json_number(*f) : std::nullopt;
}

inline std::int64_t integer_of(const boost::json::value& v, std::string_view key, std::int64_t fallback = 0) {
  const auto n = number_of(v, key);
  return n && std::isfinite(*n) ? static_cast<std::int64_t>(*n) : fallback;
}

inline bool flag_of(const boost::json::value& v, std::string_view key) {
  const auto* f = field(v, key);
  return f != nullptr && f->is_bool() && f->get_bool();
}

/// The array under `key`, or an empty one.
inline const boost::json::array& array_of(const boost::json::value& v, std::string_view key) {
  static const boost::json::array empty;
  const auto* f = field(v, key);
  return f && f->is_array() ? f->get_array() : empty;
}

/// How a value, a call or a module fares, in rising order of concern (the worst one colours a
/// call or a tree node). `note`: neither a match nor a difference (a status the report counts
/// apart, such as a value overwritten in the reference).
enum class State { ok, note, accepted, not_replayable, diverges };

inline const char* state_name(State s) {
  switch (s) {
    case State::ok: return "ok";
    case State::note: return "note";
    case State::accepted: return "accepted";
    case State::not_replayable: return "not-replayable";
    case State::diverges: return "diverges";
  }
  return "note";
}

/// A value of a diff report: "ok", else accepted by a rule, else a difference where the report
/// gives it a kind, else a note.
inline State diff_value_state(const boost::json::value& value) {
  if (text_of(value, "status") == "ok") return State::ok;
  const auto* accepted = field(value, "accepted");
  if (accepted != nullptr && !accepted->is_null()) return State::accepted;
  return text_of(value, "kind").empty() ? State::note : State::diverges;
}

/// A call of a replay report: "match", "diverges", "not_replayable", else a note.
inline State replay_state(const boost::json::value& call) {
  const std::string status = text_of(call, "status");
  if (status == "match") return State::ok;
  if (status == "diverges") return State::diverges;
  if (status == "not_replayable") return State::not_replayable;
  return State::note;
}

/// The worst of two errors, NaN winning: a NaN error is the worst news.
inline void keep_worst(std::optional<double>& worst, std::optional<double> v) {
  if (!v) return;
  if (!worst || std::isnan(*v) || (!std::isnan(*worst) && *v > *worst)) worst = v;
}

/// One module call along execution order: the plot's point and the tree's link.
struct CallPoint {
  std::string path;
  std::int64_t call = 1;
  std::optional<double> max_abs, max_rel;  ///< over its compared values; nullopt: none compared
  std::optional<double> atol, rtol;        ///< the widest tolerance its values were judged by
  State state = State::ok;
  bool innermost = false;  ///< a replayed call with no diverging call below it
};

/// A diff report's module calls in the order its values list them (execution order), then
/// the calls that only its `missing_calls` name.
inline std::vector<CallPoint> diff_calls(const boost::json::value& report) {
  std::vector<CallPoint> calls;
  std::map<std::pair<std::string, std::int64_t>, std::size_t> index;
  const auto call_of = [&](const boost::json::value& v) -> CallPoint& {
    auto key = std::make_pair(text_of(v, "module_path"), integer_of(v, "call", 1));
    auto [it, inserted] = index.emplace(key, calls.size());
    if (inserted) calls.push_back({key.first, key.second});
    return calls[it->second];
  };
  for (const auto& value : array_of(report, "tensors")) {
    CallPoint& call = call_of(value);
    call.state = std::max(call.state, diff_value_state(value));
    if (integer_of(value, "compared") <= 0) continue;
    keep_worst(call.max_abs, number_of(value, "max_abs_error"));
    keep_worst(call.max_rel, number_of(value, "max_rel_error"));
    keep_worst(call.atol, number_of(value, "atol"));
    keep_worst(call.rtol, number_of(value, "rtol"));
  }
  for (const auto& missing : array_of(report, "missing_calls")) {
    CallPoint& call = call_of(missing);
    const auto* accepted = field(missing, "accepted");
    call.state = std::max(call.state, accepted && !accepted->is_null() ? State::accepted : State::diverges);
  }
  return calls;
}

/// A replay report's calls: an array of calls, or an object holding one under "calls".
inline const boost::json::array& replay_entries(const boost::json::value& replay) {
  if (replay.is_array()) return replay.get_array();
  if (const auto* calls = field(replay, "calls"); calls && calls->is_array()) return calls->get_array();
  throw Error("tracetorch: the replay report is neither an array of calls nor an object with a \"calls\" array");
}

/// A replay report's calls as plot points, in the order the report lists them.
inline std::vector<CallPoint> replay_calls(const boost::json::value& replay) {
  std::vector<CallPoint> calls;
  for (const auto& entry : replay_entries(replay)) {
    CallPoint call{text_of(entry, "path"), integer_of(entry, "call", 1)};
    call.state = replay_state(entry);
    call.innermost = flag_of(entry, "innermost");
    call.max_abs = number_of(entry, "max_abs");
    call.max_rel = number_of(entry, "max_rel");
    call.atol = number_of(entry, "atol");
    call.rtol = number_of(entry, "rtol");
    calls.push_back(std::move(call));
  }
  return calls;
}

/// The index of the first divergence among `calls`: the report's own `first_divergence` where
/// it names one, else the first innermost diverging call (a replay's: the one that explains its
/// parents), else the first diverging call.
inline std::optional<std::size_t> first_diverging_call(const boost::json::value& report, const std::vector<CallPoint>& calls) {
  if (const auto* first = field(report, "first_divergence"); first && first->is_object()) {
    const std::string path = text_of(*first, "module_path");
    const std::int64_t call = integer_of(*first, "call", 1);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].path == path && calls[i].call == call) return i;
    }
  }
  for (const bool innermost_only : {true, false}) {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].state == State::diverges && (calls[i].innermost || !innermost_only)) return i;
    }
  }
  return std::nullopt;
}

}  // namespace tracetorch::detail::html
