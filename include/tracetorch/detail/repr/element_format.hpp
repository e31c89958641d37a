#pragma once
/// \file
/// torch's _Formatter (torch/_tensor_str.py) for the shown elements of a tensor, widened to
/// double or int64: the choice of int, fixed or sci mode and the common width. No LibTorch.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tracetorch/detail/repr/number_format.hpp"
#include "tracetorch/detail/repr/print_options.hpp"

namespace tracetorch::detail {

/// The nonzero finite values of a float tensor, as _Formatter looks at them: per sign, the
/// smallest and largest magnitude, and whether every value is integral.
struct FloatExtremes {
  double pos[2] = {0, 0}, neg[2] = {0, 0};  // [0] smallest, [1] largest magnitude
  bool any_pos = false, any_neg = false;
  bool all_integral = true;

  FloatExtremes(const double* values, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const double v = values[i];
      if (!std::isfinite(v) || v == 0) continue;
      if (v > 0) {
        if (!any_pos || v < pos[0]) pos[0] = v;
        if (!any_pos || v > pos[1]) pos[1] = v;
        any_pos = true;
      } else {
        if (!any_neg || v > neg[0]) neg[0] = v;
        if (!any_neg || v < neg[1]) neg[1] = v;
        any_neg = true;
      }
      if (all_integral && v != std::ceil(v)) all_integral = false;
    }
  }
};

/// torch's _Formatter for a floating dtype, built over the (summarised) values as doubles.
class FloatFormatter {
 public:
  FloatFormatter(const double* values, std::size_t count) {
    const FloatExtremes extremes(values, count);
    int_mode_ = extremes.all_integral;
    // No nonzero finite value: torch returns before the print option forces sci_mode, so
    // zeros and non-finites print in int mode ("0.", "nan", "-inf") at width 1.
    if (!extremes.any_pos && !extremes.any_neg) return;
    measure(extremes);
    // sci_mode=True from set_printoptions overrides the data's choice, but the width stays the
    // one measured above: sci strings are then wider than max_width and go unpadded.
    sci_mode_ = true;
  }

  std::size_t width() const { return max_width_; }

  void append(std::string& out, double v) const {
    char buf[kFloatBuffer + 1];
    std::size_t len;
    if (sci_mode_) {
      len = format_python_float(buf, v, true, kPrintPrecision);
    } else if (int_mode_) {
      len = format_python_float(buf, v, false, 0);
      if (std::isfinite(v)) buf[len++] = '.';
    } else {
      len = format_python_float(buf, v, false, kPrintPrecision);
    }
    append_padded(out, buf, len, max_width_);
  }

 private:
  /// The width _Formatter computes, in the mode the data would choose.
  void measure(const FloatExtremes& e) {
    const double min_abs = std::min(e.any_pos ? e.pos[0] : HUGE_VAL, e.any_neg ? -e.neg[0] : HUGE_VAL);
    const double max_abs = std::max(e.any_pos ? e.pos[1] : 0.0, e.any_neg ? -e.neg[1] : 0.0);
    const bool wide = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
    bool sci = false;
    int precision = kPrintPrecision;
    std::size_t extra = 0;
    if (int_mode_) {
      sci = wide;
      if (!sci) {
        precision = 0;
        extra = 1;  // the '.' int mode appends
      }
    } else {
      sci = wide || min_abs < 1.0e-4;
    }
    // torch takes the longest text over all values. For one sign, the length of '{:.Nf}' grows
    // with |v| and that of '{:.Ne}' only changes with the exponent's digit count, largest at
    // the extremes of |v|; so the per-sign extremes give the same maximum.
    char buf[kFloatBuffer];
    const auto measure_one = [&](double v) {
      max_width_ = std::max(max_width_, format_python_float(buf, v, sci, precision) + extra);
    };
    if (e.any_pos) {
      measure_one(e.pos[0]);
      measure_one(e.pos[1]);
    }
    if (e.any_neg) {
      measure_one(e.neg[0]);
      measure_one(e.neg[1]);
    }
  }

  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t max_width_ = 1;
};

/// torch's _Formatter for integer and bool dtypes: '{}'.format(value), right-aligned.
class IntFormatter {
 public:
  IntFormatter(const std::int64_t* values, std::size_t count, bool is_bool) : is_bool_(is_bool) {
    char buf[24];
    for (std::size_t i = 0; i < count; ++i) max_width_ = std::max(max_width_, text(buf, values[i]));
  }

  std::size_t width() const { return max_width_; }

  void append(std::string& out, std::int64_t v) const {
    char buf[24];
    const std::size_t len = text(buf, v);
    append_padded(out, buf, len, max_width_);
  }

 private:
  std::size_t text(char* buf, std::int64_t v) const {
    if (is_bool_) {
      const char* s = v != 0 ? "True" : "False";
      const std::size_t len = v != 0 ? 4 : 5;
      std::memcpy(buf, s, len);
      return len;
    }
    return static_cast<std::size_t>(std::to_chars(buf, buf + 24, v).ptr - buf);
  }

  bool is_bool_;
  std::size_t max_width_ = 1;
};

}  // namespace tracetorch::detail
