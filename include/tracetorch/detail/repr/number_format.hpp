#pragma once
/// \file
/// Python's `format(v, '.Nf')` and `format(v, '.Ne')` for doubles, digit for digit, without
/// LibTorch: the number formatting under every printed tensor element.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

namespace tracetorch::detail {

// Large enough for '{:.4f}' of the largest double (309 integer digits).
inline constexpr std::size_t kFloatBuffer = 400;

/// Writes `digits` decimal digits of `value` (zero-padded on the left), returns the end.
inline char* append_digits(char* out, std::uint64_t value, int digits) {
  for (int i = digits - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + digits;
}

/// `value` (non-negative, below 2^53) rounded to an integer, half to even, whatever the
/// floating-point rounding mode: floor is exact and so is the subtraction (Sterbenz).
inline std::uint64_t round_half_even(double value) {
  const double whole = std::floor(value);
  const double fraction = value - whole;
  auto rounded = static_cast<std::uint64_t>(whole);
  if (fraction > 0.5 || (fraction == 0.5 && rounded % 2 == 1)) ++rounded;
  return rounded;
}

inline int decimal_digit_count(std::uint64_t value) {
  int digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

inline constexpr double kExactPow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12};

/// format_float_exactly's '{:.Nf}' of `magnitude` after the sign at `out`; nullptr where it
/// does not apply.
inline char* format_fixed_exactly(char* out, double magnitude, int precision) {
  const double scaled = magnitude * kExactPow10[precision];
  if (!(scaled < 1e15)) return nullptr;
  const std::uint64_t units = round_half_even(scaled);
  const auto one = static_cast<std::uint64_t>(kExactPow10[precision]);
  const std::uint64_t whole = units / one;
  out = append_digits(out, whole, decimal_digit_count(whole));
  if (precision > 0) {
    *out++ = '.';
    out = append_digits(out, units % one, precision);
  }
  return out;
}

/// format_float_exactly's '{:.Ne}' of `magnitude` after the sign at `out`; nullptr where it
/// does not apply. d.ddd x 10^exponent: the mantissa digits are
/// round(|v| * 10^(precision - exponent)).
inline char* format_sci_exactly(char* out, double magnitude, int precision) {
  constexpr int kMaxScale = 12;
  if (magnitude == 0) return nullptr;  // "0.0000e+00": rare, left to to_chars
  // A first guess from a table (no log10); the loop below corrects it by one either way.
  static constexpr double kDecades[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5};
  if (magnitude < kDecades[0] || magnitude >= kDecades[13]) return nullptr;
  int exponent = -8;
  while (magnitude >= kDecades[exponent + 9]) ++exponent;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int scale = precision - exponent;
    if (scale < 0 || scale > kMaxScale) return nullptr;
    const std::uint64_t mantissa = round_half_even(magnitude * kExactPow10[scale]);
    if (mantissa >= static_cast<std::uint64_t>(kExactPow10[precision + 1])) {
      ++exponent;  // the guess was low, or rounding carried into a new digit (9.99995 -> 1.0000e+01)
    } else if (mantissa < static_cast<std::uint64_t>(kExactPow10[precision])) {
      --exponent;  // the guess was high
    } else {
      const auto lead = static_cast<std::uint64_t>(kExactPow10[precision]);
      *out++ = static_cast<char>('0' + mantissa / lead);
      if (precision > 0) {
        *out++ = '.';
        out = append_digits(out, mantissa % lead, precision);
      }
      *out++ = 'e';
      *out++ = exponent < 0 ? '-' : '+';
      const auto exponent_magnitude = static_cast<std::uint64_t>(exponent < 0 ? -exponent : exponent);
      return append_digits(out, exponent_magnitude, std::max(2, decimal_digit_count(exponent_magnitude)));
    }
  }
  return nullptr;
}

/// The fast path of format_python_float, for the values print shows most: those a float32
/// holds (float32, float16 and bfloat16 tensors). Such a value times 10^k (k <= 12) is exact
/// in a double (24 + 28 significant bits), so rounding that product to an integer, half to
/// even, rounds the decimal expansion exactly as Python does, without std::to_chars's general
/// algorithm (see docs/performance.md). Returns 0 where it does not apply (doubles, huge or
/// tiny values).
inline std::size_t format_float_exactly(char* buf, double v, bool sci, int precision) {
  if (precision < 0 || precision > 8 || !std::isfinite(v) || static_cast<double>(static_cast<float>(v)) != v) return 0;
  const double magnitude = std::fabs(v);
  char* out = buf;
  if (std::signbit(v)) *out++ = '-';
  out = sci ? format_sci_exactly(out, magnitude, precision) : format_fixed_exactly(out, magnitude, precision);
  return out == nullptr ? 0 : static_cast<std::size_t>(out - buf);
}

/// Python's `format(v, '.{precision}e')` (sci) or `format(v, '.{precision}f')`. Both sides
/// round the exact binary value correctly (half-even), so std::to_chars with a precision
/// matches Python digit for digit; only the non-finite spellings differ (Python never signs
/// a NaN).
inline std::size_t format_python_float(char* buf, double v, bool sci, int precision) {
  if (std::isnan(v)) {
    std::memcpy(buf, "nan", 3);
    return 3;
  }
  if (std::isinf(v)) {
    if (v < 0) {
      std::memcpy(buf, "-inf", 4);
      return 4;
    }
    std::memcpy(buf, "inf", 3);
    return 3;
  }
  if (const std::size_t len = format_float_exactly(buf, v, sci, precision)) return len;
  const auto fmt = sci ? std::chars_format::scientific : std::chars_format::fixed;
  const auto result = std::to_chars(buf, buf + kFloatBuffer, v, fmt, precision);
  return static_cast<std::size_t>(result.ptr - buf);
}

inline void append_padded(std::string& out, const char* text, std::size_t len, std::size_t width) {
  if (len < width) out.append(width - len, ' ');
  out.append(text, len);
}

}  // namespace tracetorch::detail
