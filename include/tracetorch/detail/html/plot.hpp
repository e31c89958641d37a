#pragma once
/// \file
/// The error plot: each module call's max abs and max rel error along execution order, on a
/// log scale, with the tolerance (atol for abs, rtol for rel: a call with either point below its
/// line has no element out of tolerance), ticks under the diverging calls and the first
/// divergence marked. Inline SVG with one path per series, so thousands of calls stay a few
/// elements; the page's script adds hover and click through the points' order.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tracetorch/detail/html/markup.hpp"
#include "tracetorch/detail/html/report_view.hpp"

namespace tracetorch::detail::html {

/// "M12.0 34.5": a path's move to (x, y). Built by appending: g++ 12 warns falsely on `"M" + std::string`.
inline std::string move_to(double x, double y) {
  std::string out = "M";
  out += coordinate(x);
  out += ' ';
  out += coordinate(y);
  return out;
}

/// The plot's frame: where decades and calls land.
struct PlotFrame {
  static constexpr double width = 1100, height = 320, left = 64, right = 16, top = 28, bottom = 262;
  double low_decade = -8, high_decade = 0;
  std::size_t calls = 1;

  double x(std::size_t i) const { return left + (static_cast<double>(i) + 0.5) * (width - left - right) / static_cast<double>(calls); }
  /// Zero sits on a band under the lowest decade, non-finite errors on a band above the highest.
  double y(double v) const {
    if (!std::isfinite(v)) return top - 14;
    if (v <= 0) return bottom + 10;
    const double decade = std::clamp(std::log10(v), low_decade, high_decade);
    return bottom - (decade - low_decade) / (high_decade - low_decade) * (bottom - top);
  }
};

/// Decades that hold every finite positive error and tolerance (at most 24 of them, from the top).
inline PlotFrame plot_frame(const std::vector<CallPoint>& calls, double atol, double rtol) {
  double low = HUGE_VAL, high = -HUGE_VAL;
  const auto take = [&](std::optional<double> v) {
    if (!v || !std::isfinite(*v) || *v <= 0) return;
    low = std::min(low, *v);
    high = std::max(high, *v);
  };
  take(atol);
  take(rtol);
  for (const auto& c : calls) {
    take(c.max_abs);
    take(c.max_rel);
    take(c.atol);
    take(c.rtol);
  }
  PlotFrame frame;
  frame.calls = std::max<std::size_t>(calls.size(), 1);
  if (low <= high) {
    frame.high_decade = std::ceil(std::log10(high));
    frame.low_decade = std::max(std::floor(std::log10(low)), frame.high_decade - 24);
  }
  if (frame.high_decade <= frame.low_decade) frame.high_decade = frame.low_decade + 1;
  return frame;
}

/// One series: a thin line through its points and a dot (a zero-length round-capped segment) at each.
inline void append_series(std::string& out, const PlotFrame& frame, const std::vector<CallPoint>& calls,
                          std::optional<double> CallPoint::*member, const char* name) {
  std::string line, dots;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto& v = calls[i].*member;
    if (!v) continue;
    std::string at = move_to(frame.x(i), frame.y(std::isnan(*v) ? HUGE_VAL : *v));
    dots += at;
    dots += "h0";
    if (!line.empty()) at[0] = 'L';
    line += at;
  }
  if (dots.empty()) return;
  out += "<path class=\"ln ln-" + std::string(name) + "\" d=\"" + line + "\"/>";
  out += "<path class=\"pt pt-" + std::string(name) + "\" d=\"" + dots + "\"/>";
}

/// The tolerance as steps: each call's own (a bf16 pair is judged more loosely), else the report's.
inline void append_tolerance(std::string& out, const PlotFrame& frame, const std::vector<CallPoint>& calls,
                             std::optional<double> CallPoint::*member, double fallback, const char* name) {
  if (!(fallback > 0) && std::none_of(calls.begin(), calls.end(), [&](const CallPoint& c) { return (c.*member).has_value(); })) return;
  const double half = (frame.x(1) - frame.x(0)) / 2;
  std::string d;
  double last_y = NAN;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const double tolerance = (calls[i].*member).value_or(fallback);
    if (!(tolerance > 0) || !std::isfinite(tolerance)) {  // no tolerance known for this call: a gap
      last_y = NAN;
      continue;
    }
    const double y = frame.y(tolerance);
    if (y != last_y) d += move_to(frame.x(i) - half, y);
    d += 'H';
    d += coordinate(frame.x(i) + half);
    last_y = y;
  }
  if (d.empty()) return;
  out += "<path class=\"tol tol-" + std::string(name) + "\" d=\"" + d + "\"/>";
}

/// Decade grid lines and their labels, the zero and non-finite bands' labels.
inline void append_axes(std::string& out, const PlotFrame& frame, std::size_t calls) {
  std::string grid;
  const int step = frame.high_decade - frame.low_decade > 12 ? 2 : 1;
  for (int d = static_cast<int>(frame.low_decade); d <= static_cast<int>(frame.high_decade); d += step) {
    const double y = frame.y(std::pow(10.0, d));
    grid += move_to(PlotFrame::left, y);
    grid += 'H';
    grid += coordinate(PlotFrame::width - PlotFrame::right);
    out += "<text class=\"ax\" x=\"" + coordinate(PlotFrame::left - 6) + "\" y=\"" + coordinate(y + 4) + "\">1e" + std::to_string(d) + "</text>";
  }
  out += "<path class=\"grid\" d=\"" + grid + "\"/>";
  out += "<text class=\"ax\" x=\"" + coordinate(PlotFrame::left - 6) + "\" y=\"" + coordinate(frame.y(0) + 4) + "\">0</text>";
  out += "<text class=\"ax\" x=\"" + coordinate(PlotFrame::left - 6) + "\" y=\"" + coordinate(frame.y(HUGE_VAL) + 4) + "\">inf/nan</text>";
  out += "<text class=\"ax-x\" x=\"" + coordinate((PlotFrame::left + PlotFrame::width) / 2) + "\" y=\"" +
         coordinate(PlotFrame::height - 6) + "\">" + std::to_string(calls) + " module calls in execution order</text>";
}

/// Ticks under the calls that diverge (red), are accepted (amber) or could not be replayed (brown).
inline void append_state_ticks(std::string& out, const PlotFrame& frame, const std::vector<CallPoint>& calls) {
  for (const State state : {State::accepted, State::not_replayable, State::diverges}) {
    std::string d;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].state == state) d += move_to(frame.x(i), PlotFrame::bottom + 18) + "v10";
    }
    if (!d.empty()) out += "<path class=\"tick s-" + std::string(state_name(state)) + "\" d=\"" + d + "\"/>";
  }
}

inline void append_first_divergence(std::string& out, const PlotFrame& frame, const CallPoint& call, std::size_t i) {
  const double x = frame.x(i);
  const bool right_half = x > PlotFrame::width / 2;
  out += "<path class=\"first\" d=\"" + move_to(x, PlotFrame::top - 22) + "V" +
         coordinate(PlotFrame::bottom + 28) + "\"/>";
  out += "<text class=\"first-label\" x=\"" + coordinate(x + (right_half ? -4 : 4)) + "\" y=\"" + coordinate(PlotFrame::top - 16) +
         "\" text-anchor=\"" + (right_half ? "end" : "start") + "\">first divergence: ";
  append_escaped(out, call.path);
  out += call.call > 1 ? " (call " + std::to_string(call.call) + ")</text>" : "</text>";
}

/// The whole <svg>: `first` the index of the first diverging call, if any.
inline std::string plot_svg(const std::vector<CallPoint>& calls, double atol, double rtol, std::optional<std::size_t> first) {
  const PlotFrame frame = plot_frame(calls, atol, rtol);
  std::string out = "<svg id=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1100 320\" role=\"img\">";
  out += "<title>max abs and max rel error per module call, log scale</title>";
  append_axes(out, frame, calls.size());
  append_tolerance(out, frame, calls, &CallPoint::atol, atol, "abs");
  append_tolerance(out, frame, calls, &CallPoint::rtol, rtol, "rel");
  append_state_ticks(out, frame, calls);
  append_series(out, frame, calls, &CallPoint::max_abs, "abs");
  append_series(out, frame, calls, &CallPoint::max_rel, "rel");
  if (first && *first < calls.size()) append_first_divergence(out, frame, calls[*first], *first);
  out += "<line id=\"cursor\" x1=\"0\" x2=\"0\" y1=\"" + coordinate(PlotFrame::top) + "\" y2=\"" + coordinate(PlotFrame::bottom) +
         "\" visibility=\"hidden\"/>";
  out += "<rect id=\"plot-hit\" x=\"" + coordinate(PlotFrame::left) + "\" y=\"0\" width=\"" +
         coordinate(PlotFrame::width - PlotFrame::left - PlotFrame::right) + "\" height=\"" + coordinate(PlotFrame::height) + "\"/>";
  out += "</svg>";
  return out;
}

}  // namespace tracetorch::detail::html
