#pragma once
/// \file
/// Python's repr(float), without LibTorch: the JSON writer and the tensor repr both need it,
/// and the JSON writer must build where LibTorch is absent (the text-only tools, the fuzzers).

#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

namespace tracetorch::detail {

/// Lays out shortest round-trip `digits` (no sign, no point) with `decpt` digits before the
/// decimal point, as CPython's float_repr does in fixed-point form: "0.0001", "3.0", "12.5".
inline void append_fixed_point(std::string& out, std::string_view digits, int decpt) {
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= ndigits) {
    out += digits;
    out.append(static_cast<std::size_t>(decpt - ndigits), '0');
    out += ".0";
  } else {
    out.append(digits.substr(0, static_cast<std::size_t>(decpt)));
    out += '.';
    out.append(digits.substr(static_cast<std::size_t>(decpt)));
  }
}

/// repr(float): the shortest text that reads back as `v`, fixed-point while the decimal
/// exponent is in [-4, 16), otherwise exponent form ('1e-06', '0.0001', '3.0', '1e+16').
inline std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits, as CPython's dtoa mode 0 picks them.
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  const std::string_view sci(buf, static_cast<std::size_t>(end - buf));
  const auto e_pos = sci.find('e');
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // digits before the decimal point
  if (decpt <= -4 || decpt > 16) return std::string(sci);  // same spelling as CPython: 1.5e+300

  std::string out;
  std::string digits;
  for (std::size_t i = 0; i < e_pos; ++i) {
    const char c = sci[i];
    if (c == '-') out += '-';
    else if (c != '.') digits += c;
  }
  append_fixed_point(out, digits, decpt);
  return out;
}

}  // namespace tracetorch::detail
