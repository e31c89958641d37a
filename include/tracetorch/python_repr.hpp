#pragma once
/// \file
/// Python's text for values, byte for byte as CPython 3 and PyTorch 1.13.1 write it, so that
/// traces made from C++ compare equal to traces made from Python.
///
/// Tensors print as `print(tensor)` does after
/// `torch.set_printoptions(sci_mode=True, linewidth=120)` with the other options at their
/// defaults (precision=4, threshold=1000, edgeitems=3). The rules are those of
/// torch/_tensor_str.py, re-implemented over raw element data: only the elements that are
/// shown (the summarised data for numel > 1000) are read and formatted, so printing costs
/// O(shown elements) whatever the tensor's size.

#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracetorch {

namespace detail {

// The print options of the traces: torch's defaults except sci_mode and linewidth.
inline constexpr int kPrintPrecision = 4;
inline constexpr std::int64_t kPrintThreshold = 1000;
inline constexpr std::int64_t kPrintEdgeItems = 3;
inline constexpr std::int64_t kPrintLineWidth = 120;

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

/// The fast path of format_python_float, for the values print shows most: those a float32
/// holds (float32, float16 and bfloat16 tensors). Such a value times 10^k (k <= 12) is exact
/// in a double (24 + 28 significant bits), so rounding that product to an integer, half to
/// even, rounds the decimal expansion exactly as Python does, several times faster than
/// std::to_chars. Returns 0 where it does not apply (doubles, huge or tiny values).
inline std::size_t format_float_exactly(char* buf, double v, bool sci, int precision) {
  static constexpr double kPow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12};
  constexpr int kMaxScale = 12;
  if (precision < 0 || precision > 8 || !std::isfinite(v) || static_cast<double>(static_cast<float>(v)) != v) return 0;
  const double magnitude = std::fabs(v);
  char* out = buf;
  if (std::signbit(v)) *out++ = '-';
  if (!sci) {
    const double scaled = magnitude * kPow10[precision];
    if (!(scaled < 1e15)) return 0;
    const std::uint64_t units = round_half_even(scaled);
    const auto one = static_cast<std::uint64_t>(kPow10[precision]);
    const std::uint64_t whole = units / one;
    out = append_digits(out, whole, decimal_digit_count(whole));
    if (precision > 0) {
      *out++ = '.';
      out = append_digits(out, units % one, precision);
    }
    return static_cast<std::size_t>(out - buf);
  }
  if (magnitude == 0) return 0;  // "0.0000e+00": rare, left to to_chars
  // d.ddd x 10^exponent: the mantissa digits are round(|v| * 10^(precision - exponent)).
  // A first guess from a table (no log10); the loop below corrects it by one either way.
  static constexpr double kDecades[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5};
  if (magnitude < kDecades[0] || magnitude >= kDecades[13]) return 0;
  int exponent = -8;
  while (magnitude >= kDecades[exponent + 9]) ++exponent;
  std::uint64_t mantissa = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int scale = precision - exponent;
    if (scale < 0 || scale > kMaxScale) return 0;
    mantissa = round_half_even(magnitude * kPow10[scale]);
    if (mantissa >= static_cast<std::uint64_t>(kPow10[precision + 1])) {
      ++exponent;  // the guess was low, or rounding carried into a new digit (9.99995 -> 1.0000e+01)
    } else if (mantissa < static_cast<std::uint64_t>(kPow10[precision])) {
      --exponent;  // the guess was high
    } else {
      const auto lead = static_cast<std::uint64_t>(kPow10[precision]);
      *out++ = static_cast<char>('0' + mantissa / lead);
      if (precision > 0) {
        *out++ = '.';
        out = append_digits(out, mantissa % lead, precision);
      }
      *out++ = 'e';
      *out++ = exponent < 0 ? '-' : '+';
      const auto exponent_magnitude = static_cast<std::uint64_t>(exponent < 0 ? -exponent : exponent);
      out = append_digits(out, exponent_magnitude, std::max(2, decimal_digit_count(exponent_magnitude)));
      return static_cast<std::size_t>(out - buf);
    }
  }
  return 0;
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

/// torch's _Formatter for a floating dtype, built over the (summarised) values as doubles.
class FloatFormatter {
 public:
  FloatFormatter(const double* values, std::size_t count) {
    // Extremes of the nonzero finite values per sign: [0] smallest, [1] largest magnitude.
    double pos[2] = {0, 0}, neg[2] = {0, 0};
    bool any_pos = false, any_neg = false;
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
      if (int_mode_ && v != std::ceil(v)) int_mode_ = false;
    }
    // No nonzero finite value: torch returns before the print option forces sci_mode, so
    // zeros and non-finites print in int mode ("0.", "nan", "-inf") at width 1.
    if (!any_pos && !any_neg) return;

    const double min_abs = std::min(any_pos ? pos[0] : HUGE_VAL, any_neg ? -neg[0] : HUGE_VAL);
    const double max_abs = std::max(any_pos ? pos[1] : 0.0, any_neg ? -neg[1] : 0.0);
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
    const auto measure = [&](double v) {
      max_width_ = std::max(max_width_, format_python_float(buf, v, sci, precision) + extra);
    };
    if (any_pos) {
      measure(pos[0]);
      measure(pos[1]);
    }
    if (any_neg) {
      measure(neg[0]);
      measure(neg[1]);
    }
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

/// The shown elements of a tensor in row-major order, widened to double / int64.
struct ShownData {
  enum class Kind { floating, complex, integer, boolean };
  Kind kind = Kind::floating;
  std::vector<double> re, im;      // floating and complex
  std::vector<std::int64_t> ints;  // integer and bool
};

/// Per dimension, the indices print shows: first and last edgeitems when summarising a
/// dimension longer than 2 * edgeitems (as get_summarized_data keeps), else all.
inline std::vector<std::vector<std::int64_t>> shown_indices(c10::IntArrayRef sizes, bool summarize) {
  std::vector<std::vector<std::int64_t>> keep(sizes.size());
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    const std::int64_t n = sizes[d];
    if (summarize && n > 2 * kPrintEdgeItems) {
      for (std::int64_t i = 0; i < kPrintEdgeItems; ++i) keep[d].push_back(i);
      for (std::int64_t i = n - kPrintEdgeItems; i < n; ++i) keep[d].push_back(i);
    } else {
      for (std::int64_t i = 0; i < n; ++i) keep[d].push_back(i);
    }
  }
  return keep;
}

/// Calls sink(element) for every kept element of a CPU strided tensor, row-major, reading
/// through the strides so views need no copy.
template <class T, class Sink>
void for_each_shown(const torch::Tensor& t, const std::vector<std::vector<std::int64_t>>& keep, Sink&& sink) {
  const T* base = t.data_ptr<T>();
  const auto dims = static_cast<std::size_t>(t.dim());
  if (dims == 0) {
    sink(base[0]);
    return;
  }
  const auto strides = t.strides();
  std::vector<std::vector<std::int64_t>> offsets(dims);
  for (std::size_t d = 0; d < dims; ++d)
    for (const auto i : keep[d]) offsets[d].push_back(i * strides[d]);
  const auto& inner = offsets[dims - 1];
  std::vector<std::size_t> pos(dims, 0);
  for (;;) {
    std::int64_t outer = 0;
    for (std::size_t d = 0; d + 1 < dims; ++d) outer += offsets[d][pos[d]];
    for (const auto off : inner) sink(base[outer + off]);
    std::size_t d = dims - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++pos[d] < offsets[d].size()) break;
      pos[d] = 0;
    }
  }
}

/// Reads the shown elements of `t` (CPU, strided, non-empty). The negative and conjugate
/// bits are applied while reading, as resolve_neg()/resolve_conj() would.
inline ShownData read_shown(const torch::Tensor& t, const std::vector<std::vector<std::int64_t>>& keep) {
  ShownData data;
  std::size_t count = 1;
  for (const auto& k : keep) count *= k.size();
  const double sign = t.is_neg() ? -1.0 : 1.0;
  const double imag_sign = t.is_conj() ? -1.0 : 1.0;
  if (!t.is_floating_point() && !t.is_complex()) data.ints.reserve(count);
  const auto real = [&] {
    data.kind = ShownData::Kind::floating;
    data.re.reserve(count);
  };
  const auto put_float = [&](auto v) { data.re.push_back(sign * static_cast<double>(static_cast<float>(v))); };
  const auto put_double = [&](double v) { data.re.push_back(sign * v); };
  const auto put_complex = [&](auto v) {
    data.re.push_back(sign * static_cast<double>(static_cast<float>(v.real())));
    data.im.push_back(sign * imag_sign * static_cast<double>(static_cast<float>(v.imag())));
  };
  const auto put_int = [&](auto v) {
    const auto i = static_cast<std::int64_t>(v);
    data.ints.push_back(sign < 0 ? -i : i);
  };
  switch (t.scalar_type()) {
    case torch::kFloat: real(); for_each_shown<float>(t, keep, put_float); break;
    case torch::kHalf: real(); for_each_shown<c10::Half>(t, keep, put_float); break;
    case torch::kBFloat16: real(); for_each_shown<c10::BFloat16>(t, keep, put_float); break;
    case torch::kDouble: real(); for_each_shown<double>(t, keep, put_double); break;
    case torch::kComplexFloat:
    case torch::kComplexHalf:
    case torch::kComplexDouble:
      data.kind = ShownData::Kind::complex;
      data.re.reserve(count);
      data.im.reserve(count);
      if (t.scalar_type() == torch::kComplexFloat) {
        for_each_shown<c10::complex<float>>(t, keep, put_complex);
      } else if (t.scalar_type() == torch::kComplexHalf) {
        for_each_shown<c10::complex<c10::Half>>(t, keep, put_complex);
      } else {
        for_each_shown<c10::complex<double>>(t, keep, [&](c10::complex<double> v) {
          data.re.push_back(sign * v.real());
          data.im.push_back(sign * imag_sign * v.imag());
        });
      }
      break;
    case torch::kBool:
      data.kind = ShownData::Kind::boolean;
      data.ints.reserve(count);
      for_each_shown<bool>(t, keep, [&](bool v) { data.ints.push_back(v ? 1 : 0); });
      break;
    case torch::kLong: data.kind = ShownData::Kind::integer; for_each_shown<std::int64_t>(t, keep, put_int); break;
    case torch::kInt: data.kind = ShownData::Kind::integer; for_each_shown<std::int32_t>(t, keep, put_int); break;
    case torch::kShort: data.kind = ShownData::Kind::integer; for_each_shown<std::int16_t>(t, keep, put_int); break;
    case torch::kChar: data.kind = ShownData::Kind::integer; for_each_shown<std::int8_t>(t, keep, put_int); break;
    case torch::kByte: data.kind = ShownData::Kind::integer; for_each_shown<std::uint8_t>(t, keep, put_int); break;
    default: {
      // Anything else is printed through float64, as the dtype's values would read.
      const auto converted = t.to(torch::kDouble);
      real();
      for_each_shown<double>(converted, keep, put_double);
      break;
    }
  }
  return data;
}

/// Lays out the shown elements as _tensor_str_with_formatter does. Elements are written in
/// row-major order straight into `out`; `next_` walks the shown data.
class BodyWriter {
 public:
  BodyWriter(const ShownData& data, c10::IntArrayRef sizes, bool summarize)
      : data_(data), sizes_(sizes), summarize_(summarize) {
    switch (data.kind) {
      case ShownData::Kind::floating: re_.emplace(data.re.data(), data.re.size()); break;
      case ShownData::Kind::complex:
        re_.emplace(data.re.data(), data.re.size());
        im_.emplace(data.im.data(), data.im.size());
        break;
      case ShownData::Kind::integer:
      case ShownData::Kind::boolean:
        int_.emplace(data.ints.data(), data.ints.size(), data.kind == ShownData::Kind::boolean);
        break;
    }
  }

  void write(std::string& out, std::int64_t indent) {
    next_ = 0;
    if (sizes_.empty()) {
      element(out);
      return;
    }
    tensor(out, 0, indent);
  }

 private:
  std::size_t element_length() const {
    if (int_) return int_->width() + 2;
    std::size_t length = re_->width() + 2;
    if (im_) length += im_->width() + 1;  // the imaginary part and its 'j'
    return length;
  }

  void element(std::string& out) {
    const std::size_t i = next_++;
    if (int_) {
      int_->append(out, data_.ints[i]);
      return;
    }
    re_->append(out, data_.re[i]);
    if (!im_) return;
    // imag_str = (format(imag) + "j").lstrip(); a '+' joins it unless it carries a sign.
    const std::size_t start = out.size();
    im_->append(out, data_.im[i]);
    std::size_t first = start;
    while (first < out.size() && out[first] == ' ') ++first;
    out.erase(start, first - start);
    if (out[start] != '-' && out[start] != '+') out.insert(out.begin() + static_cast<std::ptrdiff_t>(start), '+');
    out += 'j';
  }

  bool ellipsis(std::size_t d) const { return summarize_ && sizes_[d] > 2 * kPrintEdgeItems; }

  std::size_t shown(std::size_t d) const {
    return ellipsis(d) ? static_cast<std::size_t>(2 * kPrintEdgeItems) : static_cast<std::size_t>(sizes_[d]);
  }

  void tensor(std::string& out, std::size_t d, std::int64_t indent) {
    const std::size_t dims = sizes_.size();
    if (d + 1 == dims) {
      vector(out, d, indent);
      return;
    }
    const std::size_t n = shown(d);
    const bool dots = ellipsis(d);
    const std::size_t items = n + (dots ? 1 : 0);
    out += '[';
    for (std::size_t item = 0; item < items; ++item) {
      if (item > 0) {
        out += ',';
        out.append(dims - d - 1, '\n');
        out.append(static_cast<std::size_t>(indent + 1), ' ');
      }
      if (dots && item == static_cast<std::size_t>(kPrintEdgeItems)) {
        out += "...";
        continue;
      }
      tensor(out, d + 1, indent + 1);
    }
    out += ']';
  }

  void vector(std::string& out, std::size_t d, std::int64_t indent) {
    const auto room = kPrintLineWidth - indent;
    const auto length = static_cast<std::int64_t>(element_length());
    const std::size_t per_line = room > 0 ? static_cast<std::size_t>(std::max<std::int64_t>(1, room / length)) : 1;
    const std::size_t n = shown(d);
    const bool dots = ellipsis(d);
    const std::size_t items = n + (dots ? 1 : 0);
    out += '[';
    for (std::size_t item = 0; item < items; ++item) {
      if (item > 0) {
        if (item % per_line == 0) {
          out += ",\n";
          out.append(static_cast<std::size_t>(indent + 1), ' ');
        } else {
          out += ", ";
        }
      }
      if (dots && item == static_cast<std::size_t>(kPrintEdgeItems)) {
        out += " ...";
        continue;
      }
      element(out);
    }
    out += ']';
  }

  const ShownData& data_;
  c10::IntArrayRef sizes_;
  bool summarize_;
  std::optional<FloatFormatter> re_, im_;
  std::optional<IntFormatter> int_;
  std::size_t next_ = 0;
};

/// _tensor_str: the bracketed contents of a dense tensor, laid out for `indent`.
inline std::string tensor_body(torch::Tensor t, std::int64_t indent) {
  if (t.numel() == 0) return "[]";
  const bool summarize = t.numel() > kPrintThreshold;
  if (t._is_zerotensor()) t = t.clone();  // a ZeroTensor has no storage to read
  if (t.is_quantized()) t = t.dequantize();
  const auto sizes = t.sizes().vec();

  std::vector<std::vector<std::int64_t>> keep;
  if (t.device().is_cpu() && t.layout() == torch::kStrided) {
    keep = shown_indices(sizes, summarize);
  } else {
    // Elsewhere, cut the shown part out on the device first so only it crosses to the host.
    if (t.layout() != torch::kStrided) t = t.to_dense();
    if (summarize) {
      for (std::int64_t d = 0; d < t.dim(); ++d) {
        const auto n = t.size(d);
        if (n > 2 * kPrintEdgeItems)
          t = torch::cat({t.narrow(d, 0, kPrintEdgeItems), t.narrow(d, n - kPrintEdgeItems, kPrintEdgeItems)}, d);
      }
    }
    t = t.cpu();
    keep = shown_indices(t.sizes(), false);
  }
  const ShownData data = read_shown(t, keep);
  std::string out;
  out.reserve(64 + (data.re.size() + data.ints.size()) * 14 + data.im.size() * 12);
  BodyWriter(data, sizes, summarize).write(out, indent);
  return out;
}

/// str(tuple(shape)): "(2, 3)", "(5,)", "()".
inline std::string python_tuple_repr(c10::IntArrayRef sizes) {
  std::string out = "(";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  if (sizes.size() == 1) out += ',';
  out += ')';
  return out;
}

/// _add_suffixes: ", suffix" while the line stays within the width, else a new line.
inline void add_suffixes(std::string& text, const std::vector<std::string>& suffixes, std::int64_t indent,
                         bool force_newline) {
  const auto newline = text.rfind('\n');
  // torch's arithmetic (rfind gives -1 when there is no newline), kept for its +2 slack.
  std::int64_t last_line_len = static_cast<std::int64_t>(text.size()) -
                               (newline == std::string::npos ? -1 : static_cast<std::int64_t>(newline)) + 1;
  for (const auto& suffix : suffixes) {
    const auto suffix_len = static_cast<std::int64_t>(suffix.size());
    if (force_newline || last_line_len + suffix_len + 2 > kPrintLineWidth) {
      text += ",\n";
      text.append(static_cast<std::size_t>(indent), ' ');
      text += suffix;
      last_line_len = indent + suffix_len;
      force_newline = false;
    } else {
      text += ", ";
      text += suffix;
      last_line_len += suffix_len + 2;
    }
  }
  text += ')';
}

inline std::string layout_repr(c10::Layout layout) {
  switch (layout) {
    case c10::kStrided: return "torch.strided";
    case c10::kSparse: return "torch.sparse_coo";
    case c10::kSparseCsr: return "torch.sparse_csr";
    case c10::kSparseCsc: return "torch.sparse_csc";
    case c10::kSparseBsr: return "torch.sparse_bsr";
    case c10::kSparseBsc: return "torch.sparse_bsc";
    case c10::kMkldnn: return "torch._mkldnn";
    default: return "torch.layout";
  }
}

/// The grad_fn name Python shows: the node's class name without its C++ namespace.
inline std::string grad_fn_name(const torch::Tensor& t) {
  std::string name = t.grad_fn()->name();
  const auto colons = name.rfind("::");
  if (colons != std::string::npos) name.erase(0, colons + 2);
  return name;
}

}  // namespace detail

/// str(dtype): "torch.float32", "torch.int64", "torch.bool", "torch.bfloat16", ...
inline std::string python_dtype_repr(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::ComplexHalf: return "torch.complex32";
    case c10::ScalarType::ComplexFloat: return "torch.complex64";
    case c10::ScalarType::ComplexDouble: return "torch.complex128";
    case c10::ScalarType::Bool: return "torch.bool";
    case c10::ScalarType::QInt8: return "torch.qint8";
    case c10::ScalarType::QUInt8: return "torch.quint8";
    case c10::ScalarType::QInt32: return "torch.qint32";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::QUInt4x2: return "torch.quint4x2";
    case c10::ScalarType::QUInt2x4: return "torch.quint2x4";
    default: return std::string("torch.") + c10::toString(type);
  }
}

/// str(tensor.shape): "torch.Size([2, 7, 64])", "torch.Size([])".
inline std::string python_shape_repr(c10::IntArrayRef sizes) {
  std::string out = "torch.Size([";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  out += "])";
  return out;
}

/// repr(float): the shortest text that reads back as `v`, fixed-point while the decimal
/// exponent is in [-4, 16), otherwise exponent form ('1e-06', '0.0001', '3.0', '1e+16').
inline std::string python_repr(double v) {
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
    out.append(digits, 0, static_cast<std::size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<std::size_t>(decpt));
  }
  return out;
}

/// repr(int) for every integer type except bool and the character types.
template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char> && !std::same_as<T, wchar_t> &&
           !std::same_as<T, char8_t> && !std::same_as<T, char16_t> && !std::same_as<T, char32_t>)
inline std::string python_repr(T v) {
  char buf[24];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

/// repr(bool). A template so that pointers (e.g. string literals) never convert to bool.
template <std::same_as<bool> T>
inline std::string python_repr(T v) {
  return v ? "True" : "False";
}

namespace detail {

// Code points >= 0x80 for which CPython's str.isprintable() is false (Unicode 14.0, as in
// Python 3.11: categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than space), as inclusive
// ranges, generated from unicodedata. repr() escapes these.
inline constexpr std::uint32_t kNonPrintable[][2] = {
    {0x80,0xa0}, {0xad,0xad}, {0x378,0x379}, {0x380,0x383}, {0x38b,0x38b}, {0x38d,0x38d},
    {0x3a2,0x3a2}, {0x530,0x530}, {0x557,0x558}, {0x58b,0x58c}, {0x590,0x590}, {0x5c8,0x5cf},
    {0x5eb,0x5ee}, {0x5f5,0x605}, {0x61c,0x61c}, {0x6dd,0x6dd}, {0x70e,0x70f}, {0x74b,0x74c},
    {0x7b2,0x7bf}, {0x7fb,0x7fc}, {0x82e,0x82f}, {0x83f,0x83f}, {0x85c,0x85d}, {0x85f,0x85f},
    {0x86b,0x86f}, {0x88f,0x897}, {0x8e2,0x8e2}, {0x984,0x984}, {0x98d,0x98e}, {0x991,0x992},
    {0x9a9,0x9a9}, {0x9b1,0x9b1}, {0x9b3,0x9b5}, {0x9ba,0x9bb}, {0x9c5,0x9c6}, {0x9c9,0x9ca},
    {0x9cf,0x9d6}, {0x9d8,0x9db}, {0x9de,0x9de}, {0x9e4,0x9e5}, {0x9ff,0xa00}, {0xa04,0xa04},
    {0xa0b,0xa0e}, {0xa11,0xa12}, {0xa29,0xa29}, {0xa31,0xa31}, {0xa34,0xa34}, {0xa37,0xa37},
    {0xa3a,0xa3b}, {0xa3d,0xa3d}, {0xa43,0xa46}, {0xa49,0xa4a}, {0xa4e,0xa50}, {0xa52,0xa58},
    {0xa5d,0xa5d}, {0xa5f,0xa65}, {0xa77,0xa80}, {0xa84,0xa84}, {0xa8e,0xa8e}, {0xa92,0xa92},
    {0xaa9,0xaa9}, {0xab1,0xab1}, {0xab4,0xab4}, {0xaba,0xabb}, {0xac6,0xac6}, {0xaca,0xaca},
    {0xace,0xacf}, {0xad1,0xadf}, {0xae4,0xae5}, {0xaf2,0xaf8}, {0xb00,0xb00}, {0xb04,0xb04},
    {0xb0d,0xb0e}, {0xb11,0xb12}, {0xb29,0xb29}, {0xb31,0xb31}, {0xb34,0xb34}, {0xb3a,0xb3b},
    {0xb45,0xb46}, {0xb49,0xb4a}, {0xb4e,0xb54}, {0xb58,0xb5b}, {0xb5e,0xb5e}, {0xb64,0xb65},
    {0xb78,0xb81}, {0xb84,0xb84}, {0xb8b,0xb8d}, {0xb91,0xb91}, {0xb96,0xb98}, {0xb9b,0xb9b},
    {0xb9d,0xb9d}, {0xba0,0xba2}, {0xba5,0xba7}, {0xbab,0xbad}, {0xbba,0xbbd}, {0xbc3,0xbc5},
    {0xbc9,0xbc9}, {0xbce,0xbcf}, {0xbd1,0xbd6}, {0xbd8,0xbe5}, {0xbfb,0xbff}, {0xc0d,0xc0d},
    {0xc11,0xc11}, {0xc29,0xc29}, {0xc3a,0xc3b}, {0xc45,0xc45}, {0xc49,0xc49}, {0xc4e,0xc54},
    {0xc57,0xc57}, {0xc5b,0xc5c}, {0xc5e,0xc5f}, {0xc64,0xc65}, {0xc70,0xc76}, {0xc8d,0xc8d},
    {0xc91,0xc91}, {0xca9,0xca9}, {0xcb4,0xcb4}, {0xcba,0xcbb}, {0xcc5,0xcc5}, {0xcc9,0xcc9},
    {0xcce,0xcd4}, {0xcd7,0xcdc}, {0xcdf,0xcdf}, {0xce4,0xce5}, {0xcf0,0xcf0}, {0xcf3,0xcff},
    {0xd0d,0xd0d}, {0xd11,0xd11}, {0xd45,0xd45}, {0xd49,0xd49}, {0xd50,0xd53}, {0xd64,0xd65},
    {0xd80,0xd80}, {0xd84,0xd84}, {0xd97,0xd99}, {0xdb2,0xdb2}, {0xdbc,0xdbc}, {0xdbe,0xdbf},
    {0xdc7,0xdc9}, {0xdcb,0xdce}, {0xdd5,0xdd5}, {0xdd7,0xdd7}, {0xde0,0xde5}, {0xdf0,0xdf1},
    {0xdf5,0xe00}, {0xe3b,0xe3e}, {0xe5c,0xe80}, {0xe83,0xe83}, {0xe85,0xe85}, {0xe8b,0xe8b},
    {0xea4,0xea4}, {0xea6,0xea6}, {0xebe,0xebf}, {0xec5,0xec5}, {0xec7,0xec7}, {0xece,0xecf},
    {0xeda,0xedb}, {0xee0,0xeff}, {0xf48,0xf48}, {0xf6d,0xf70}, {0xf98,0xf98}, {0xfbd,0xfbd},
    {0xfcd,0xfcd}, {0xfdb,0xfff}, {0x10c6,0x10c6}, {0x10c8,0x10cc}, {0x10ce,0x10cf}, {0x1249,0x1249},
    {0x124e,0x124f}, {0x1257,0x1257}, {0x1259,0x1259}, {0x125e,0x125f}, {0x1289,0x1289},
    {0x128e,0x128f}, {0x12b1,0x12b1}, {0x12b6,0x12b7}, {0x12bf,0x12bf}, {0x12c1,0x12c1},
    {0x12c6,0x12c7}, {0x12d7,0x12d7}, {0x1311,0x1311}, {0x1316,0x1317}, {0x135b,0x135c},
    {0x137d,0x137f}, {0x139a,0x139f}, {0x13f6,0x13f7}, {0x13fe,0x13ff}, {0x1680,0x1680},
    {0x169d,0x169f}, {0x16f9,0x16ff}, {0x1716,0x171e}, {0x1737,0x173f}, {0x1754,0x175f},
    {0x176d,0x176d}, {0x1771,0x1771}, {0x1774,0x177f}, {0x17de,0x17df}, {0x17ea,0x17ef},
    {0x17fa,0x17ff}, {0x180e,0x180e}, {0x181a,0x181f}, {0x1879,0x187f}, {0x18ab,0x18af},
    {0x18f6,0x18ff}, {0x191f,0x191f}, {0x192c,0x192f}, {0x193c,0x193f}, {0x1941,0x1943},
    {0x196e,0x196f}, {0x1975,0x197f}, {0x19ac,0x19af}, {0x19ca,0x19cf}, {0x19db,0x19dd},
    {0x1a1c,0x1a1d}, {0x1a5f,0x1a5f}, {0x1a7d,0x1a7e}, {0x1a8a,0x1a8f}, {0x1a9a,0x1a9f},
    {0x1aae,0x1aaf}, {0x1acf,0x1aff}, {0x1b4d,0x1b4f}, {0x1b7f,0x1b7f}, {0x1bf4,0x1bfb},
    {0x1c38,0x1c3a}, {0x1c4a,0x1c4c}, {0x1c89,0x1c8f}, {0x1cbb,0x1cbc}, {0x1cc8,0x1ccf},
    {0x1cfb,0x1cff}, {0x1f16,0x1f17}, {0x1f1e,0x1f1f}, {0x1f46,0x1f47}, {0x1f4e,0x1f4f},
    {0x1f58,0x1f58}, {0x1f5a,0x1f5a}, {0x1f5c,0x1f5c}, {0x1f5e,0x1f5e}, {0x1f7e,0x1f7f},
    {0x1fb5,0x1fb5}, {0x1fc5,0x1fc5}, {0x1fd4,0x1fd5}, {0x1fdc,0x1fdc}, {0x1ff0,0x1ff1},
    {0x1ff5,0x1ff5}, {0x1fff,0x200f}, {0x2028,0x202f}, {0x205f,0x206f}, {0x2072,0x2073},
    {0x208f,0x208f}, {0x209d,0x209f}, {0x20c1,0x20cf}, {0x20f1,0x20ff}, {0x218c,0x218f},
    {0x2427,0x243f}, {0x244b,0x245f}, {0x2b74,0x2b75}, {0x2b96,0x2b96}, {0x2cf4,0x2cf8},
    {0x2d26,0x2d26}, {0x2d28,0x2d2c}, {0x2d2e,0x2d2f}, {0x2d68,0x2d6e}, {0x2d71,0x2d7e},
    {0x2d97,0x2d9f}, {0x2da7,0x2da7}, {0x2daf,0x2daf}, {0x2db7,0x2db7}, {0x2dbf,0x2dbf},
    {0x2dc7,0x2dc7}, {0x2dcf,0x2dcf}, {0x2dd7,0x2dd7}, {0x2ddf,0x2ddf}, {0x2e5e,0x2e7f},
    {0x2e9a,0x2e9a}, {0x2ef4,0x2eff}, {0x2fd6,0x2fef}, {0x2ffc,0x3000}, {0x3040,0x3040},
    {0x3097,0x3098}, {0x3100,0x3104}, {0x3130,0x3130}, {0x318f,0x318f}, {0x31e4,0x31ef},
    {0x321f,0x321f}, {0xa48d,0xa48f}, {0xa4c7,0xa4cf}, {0xa62c,0xa63f}, {0xa6f8,0xa6ff},
    {0xa7cb,0xa7cf}, {0xa7d2,0xa7d2}, {0xa7d4,0xa7d4}, {0xa7da,0xa7f1}, {0xa82d,0xa82f},
    {0xa83a,0xa83f}, {0xa878,0xa87f}, {0xa8c6,0xa8cd}, {0xa8da,0xa8df}, {0xa954,0xa95e},
    {0xa97d,0xa97f}, {0xa9ce,0xa9ce}, {0xa9da,0xa9dd}, {0xa9ff,0xa9ff}, {0xaa37,0xaa3f},
    {0xaa4e,0xaa4f}, {0xaa5a,0xaa5b}, {0xaac3,0xaada}, {0xaaf7,0xab00}, {0xab07,0xab08},
    {0xab0f,0xab10}, {0xab17,0xab1f}, {0xab27,0xab27}, {0xab2f,0xab2f}, {0xab6c,0xab6f},
    {0xabee,0xabef}, {0xabfa,0xabff}, {0xd7a4,0xd7af}, {0xd7c7,0xd7ca}, {0xd7fc,0xf8ff},
    {0xfa6e,0xfa6f}, {0xfada,0xfaff}, {0xfb07,0xfb12}, {0xfb18,0xfb1c}, {0xfb37,0xfb37},
    {0xfb3d,0xfb3d}, {0xfb3f,0xfb3f}, {0xfb42,0xfb42}, {0xfb45,0xfb45}, {0xfbc3,0xfbd2},
    {0xfd90,0xfd91}, {0xfdc8,0xfdce}, {0xfdd0,0xfdef}, {0xfe1a,0xfe1f}, {0xfe53,0xfe53},
    {0xfe67,0xfe67}, {0xfe6c,0xfe6f}, {0xfe75,0xfe75}, {0xfefd,0xff00}, {0xffbf,0xffc1},
    {0xffc8,0xffc9}, {0xffd0,0xffd1}, {0xffd8,0xffd9}, {0xffdd,0xffdf}, {0xffe7,0xffe7},
    {0xffef,0xfffb}, {0xfffe,0xffff}, {0x1000c,0x1000c}, {0x10027,0x10027}, {0x1003b,0x1003b},
    {0x1003e,0x1003e}, {0x1004e,0x1004f}, {0x1005e,0x1007f}, {0x100fb,0x100ff}, {0x10103,0x10106},
    {0x10134,0x10136}, {0x1018f,0x1018f}, {0x1019d,0x1019f}, {0x101a1,0x101cf}, {0x101fe,0x1027f},
    {0x1029d,0x1029f}, {0x102d1,0x102df}, {0x102fc,0x102ff}, {0x10324,0x1032c}, {0x1034b,0x1034f},
    {0x1037b,0x1037f}, {0x1039e,0x1039e}, {0x103c4,0x103c7}, {0x103d6,0x103ff}, {0x1049e,0x1049f},
    {0x104aa,0x104af}, {0x104d4,0x104d7}, {0x104fc,0x104ff}, {0x10528,0x1052f}, {0x10564,0x1056e},
    {0x1057b,0x1057b}, {0x1058b,0x1058b}, {0x10593,0x10593}, {0x10596,0x10596}, {0x105a2,0x105a2},
    {0x105b2,0x105b2}, {0x105ba,0x105ba}, {0x105bd,0x105ff}, {0x10737,0x1073f}, {0x10756,0x1075f},
    {0x10768,0x1077f}, {0x10786,0x10786}, {0x107b1,0x107b1}, {0x107bb,0x107ff}, {0x10806,0x10807},
    {0x10809,0x10809}, {0x10836,0x10836}, {0x10839,0x1083b}, {0x1083d,0x1083e}, {0x10856,0x10856},
    {0x1089f,0x108a6}, {0x108b0,0x108df}, {0x108f3,0x108f3}, {0x108f6,0x108fa}, {0x1091c,0x1091e},
    {0x1093a,0x1093e}, {0x10940,0x1097f}, {0x109b8,0x109bb}, {0x109d0,0x109d1}, {0x10a04,0x10a04},
    {0x10a07,0x10a0b}, {0x10a14,0x10a14}, {0x10a18,0x10a18}, {0x10a36,0x10a37}, {0x10a3b,0x10a3e},
    {0x10a49,0x10a4f}, {0x10a59,0x10a5f}, {0x10aa0,0x10abf}, {0x10ae7,0x10aea}, {0x10af7,0x10aff},
    {0x10b36,0x10b38}, {0x10b56,0x10b57}, {0x10b73,0x10b77}, {0x10b92,0x10b98}, {0x10b9d,0x10ba8},
    {0x10bb0,0x10bff}, {0x10c49,0x10c7f}, {0x10cb3,0x10cbf}, {0x10cf3,0x10cf9}, {0x10d28,0x10d2f},
    {0x10d3a,0x10e5f}, {0x10e7f,0x10e7f}, {0x10eaa,0x10eaa}, {0x10eae,0x10eaf}, {0x10eb2,0x10eff},
    {0x10f28,0x10f2f}, {0x10f5a,0x10f6f}, {0x10f8a,0x10faf}, {0x10fcc,0x10fdf}, {0x10ff7,0x10fff},
    {0x1104e,0x11051}, {0x11076,0x1107e}, {0x110bd,0x110bd}, {0x110c3,0x110cf}, {0x110e9,0x110ef},
    {0x110fa,0x110ff}, {0x11135,0x11135}, {0x11148,0x1114f}, {0x11177,0x1117f}, {0x111e0,0x111e0},
    {0x111f5,0x111ff}, {0x11212,0x11212}, {0x1123f,0x1127f}, {0x11287,0x11287}, {0x11289,0x11289},
    {0x1128e,0x1128e}, {0x1129e,0x1129e}, {0x112aa,0x112af}, {0x112eb,0x112ef}, {0x112fa,0x112ff},
    {0x11304,0x11304}, {0x1130d,0x1130e}, {0x11311,0x11312}, {0x11329,0x11329}, {0x11331,0x11331},
    {0x11334,0x11334}, {0x1133a,0x1133a}, {0x11345,0x11346}, {0x11349,0x1134a}, {0x1134e,0x1134f},
    {0x11351,0x11356}, {0x11358,0x1135c}, {0x11364,0x11365}, {0x1136d,0x1136f}, {0x11375,0x113ff},
    {0x1145c,0x1145c}, {0x11462,0x1147f}, {0x114c8,0x114cf}, {0x114da,0x1157f}, {0x115b6,0x115b7},
    {0x115de,0x115ff}, {0x11645,0x1164f}, {0x1165a,0x1165f}, {0x1166d,0x1167f}, {0x116ba,0x116bf},
    {0x116ca,0x116ff}, {0x1171b,0x1171c}, {0x1172c,0x1172f}, {0x11747,0x117ff}, {0x1183c,0x1189f},
    {0x118f3,0x118fe}, {0x11907,0x11908}, {0x1190a,0x1190b}, {0x11914,0x11914}, {0x11917,0x11917},
    {0x11936,0x11936}, {0x11939,0x1193a}, {0x11947,0x1194f}, {0x1195a,0x1199f}, {0x119a8,0x119a9},
    {0x119d8,0x119d9}, {0x119e5,0x119ff}, {0x11a48,0x11a4f}, {0x11aa3,0x11aaf}, {0x11af9,0x11bff},
    {0x11c09,0x11c09}, {0x11c37,0x11c37}, {0x11c46,0x11c4f}, {0x11c6d,0x11c6f}, {0x11c90,0x11c91},
    {0x11ca8,0x11ca8}, {0x11cb7,0x11cff}, {0x11d07,0x11d07}, {0x11d0a,0x11d0a}, {0x11d37,0x11d39},
    {0x11d3b,0x11d3b}, {0x11d3e,0x11d3e}, {0x11d48,0x11d4f}, {0x11d5a,0x11d5f}, {0x11d66,0x11d66},
    {0x11d69,0x11d69}, {0x11d8f,0x11d8f}, {0x11d92,0x11d92}, {0x11d99,0x11d9f}, {0x11daa,0x11edf},
    {0x11ef9,0x11faf}, {0x11fb1,0x11fbf}, {0x11ff2,0x11ffe}, {0x1239a,0x123ff}, {0x1246f,0x1246f},
    {0x12475,0x1247f}, {0x12544,0x12f8f}, {0x12ff3,0x12fff}, {0x1342f,0x143ff}, {0x14647,0x167ff},
    {0x16a39,0x16a3f}, {0x16a5f,0x16a5f}, {0x16a6a,0x16a6d}, {0x16abf,0x16abf}, {0x16aca,0x16acf},
    {0x16aee,0x16aef}, {0x16af6,0x16aff}, {0x16b46,0x16b4f}, {0x16b5a,0x16b5a}, {0x16b62,0x16b62},
    {0x16b78,0x16b7c}, {0x16b90,0x16e3f}, {0x16e9b,0x16eff}, {0x16f4b,0x16f4e}, {0x16f88,0x16f8e},
    {0x16fa0,0x16fdf}, {0x16fe5,0x16fef}, {0x16ff2,0x16fff}, {0x187f8,0x187ff}, {0x18cd6,0x18cff},
    {0x18d09,0x1afef}, {0x1aff4,0x1aff4}, {0x1affc,0x1affc}, {0x1afff,0x1afff}, {0x1b123,0x1b14f},
    {0x1b153,0x1b163}, {0x1b168,0x1b16f}, {0x1b2fc,0x1bbff}, {0x1bc6b,0x1bc6f}, {0x1bc7d,0x1bc7f},
    {0x1bc89,0x1bc8f}, {0x1bc9a,0x1bc9b}, {0x1bca0,0x1ceff}, {0x1cf2e,0x1cf2f}, {0x1cf47,0x1cf4f},
    {0x1cfc4,0x1cfff}, {0x1d0f6,0x1d0ff}, {0x1d127,0x1d128}, {0x1d173,0x1d17a}, {0x1d1eb,0x1d1ff},
    {0x1d246,0x1d2df}, {0x1d2f4,0x1d2ff}, {0x1d357,0x1d35f}, {0x1d379,0x1d3ff}, {0x1d455,0x1d455},
    {0x1d49d,0x1d49d}, {0x1d4a0,0x1d4a1}, {0x1d4a3,0x1d4a4}, {0x1d4a7,0x1d4a8}, {0x1d4ad,0x1d4ad},
    {0x1d4ba,0x1d4ba}, {0x1d4bc,0x1d4bc}, {0x1d4c4,0x1d4c4}, {0x1d506,0x1d506}, {0x1d50b,0x1d50c},
    {0x1d515,0x1d515}, {0x1d51d,0x1d51d}, {0x1d53a,0x1d53a}, {0x1d53f,0x1d53f}, {0x1d545,0x1d545},
    {0x1d547,0x1d549}, {0x1d551,0x1d551}, {0x1d6a6,0x1d6a7}, {0x1d7cc,0x1d7cd}, {0x1da8c,0x1da9a},
    {0x1daa0,0x1daa0}, {0x1dab0,0x1deff}, {0x1df1f,0x1dfff}, {0x1e007,0x1e007}, {0x1e019,0x1e01a},
    {0x1e022,0x1e022}, {0x1e025,0x1e025}, {0x1e02b,0x1e0ff}, {0x1e12d,0x1e12f}, {0x1e13e,0x1e13f},
    {0x1e14a,0x1e14d}, {0x1e150,0x1e28f}, {0x1e2af,0x1e2bf}, {0x1e2fa,0x1e2fe}, {0x1e300,0x1e7df},
    {0x1e7e7,0x1e7e7}, {0x1e7ec,0x1e7ec}, {0x1e7ef,0x1e7ef}, {0x1e7ff,0x1e7ff}, {0x1e8c5,0x1e8c6},
    {0x1e8d7,0x1e8ff}, {0x1e94c,0x1e94f}, {0x1e95a,0x1e95d}, {0x1e960,0x1ec70}, {0x1ecb5,0x1ed00},
    {0x1ed3e,0x1edff}, {0x1ee04,0x1ee04}, {0x1ee20,0x1ee20}, {0x1ee23,0x1ee23}, {0x1ee25,0x1ee26},
    {0x1ee28,0x1ee28}, {0x1ee33,0x1ee33}, {0x1ee38,0x1ee38}, {0x1ee3a,0x1ee3a}, {0x1ee3c,0x1ee41},
    {0x1ee43,0x1ee46}, {0x1ee48,0x1ee48}, {0x1ee4a,0x1ee4a}, {0x1ee4c,0x1ee4c}, {0x1ee50,0x1ee50},
    {0x1ee53,0x1ee53}, {0x1ee55,0x1ee56}, {0x1ee58,0x1ee58}, {0x1ee5a,0x1ee5a}, {0x1ee5c,0x1ee5c},
    {0x1ee5e,0x1ee5e}, {0x1ee60,0x1ee60}, {0x1ee63,0x1ee63}, {0x1ee65,0x1ee66}, {0x1ee6b,0x1ee6b},
    {0x1ee73,0x1ee73}, {0x1ee78,0x1ee78}, {0x1ee7d,0x1ee7d}, {0x1ee7f,0x1ee7f}, {0x1ee8a,0x1ee8a},
    {0x1ee9c,0x1eea0}, {0x1eea4,0x1eea4}, {0x1eeaa,0x1eeaa}, {0x1eebc,0x1eeef}, {0x1eef2,0x1efff},
    {0x1f02c,0x1f02f}, {0x1f094,0x1f09f}, {0x1f0af,0x1f0b0}, {0x1f0c0,0x1f0c0}, {0x1f0d0,0x1f0d0},
    {0x1f0f6,0x1f0ff}, {0x1f1ae,0x1f1e5}, {0x1f203,0x1f20f}, {0x1f23c,0x1f23f}, {0x1f249,0x1f24f},
    {0x1f252,0x1f25f}, {0x1f266,0x1f2ff}, {0x1f6d8,0x1f6dc}, {0x1f6ed,0x1f6ef}, {0x1f6fd,0x1f6ff},
    {0x1f774,0x1f77f}, {0x1f7d9,0x1f7df}, {0x1f7ec,0x1f7ef}, {0x1f7f1,0x1f7ff}, {0x1f80c,0x1f80f},
    {0x1f848,0x1f84f}, {0x1f85a,0x1f85f}, {0x1f888,0x1f88f}, {0x1f8ae,0x1f8af}, {0x1f8b2,0x1f8ff},
    {0x1fa54,0x1fa5f}, {0x1fa6e,0x1fa6f}, {0x1fa75,0x1fa77}, {0x1fa7d,0x1fa7f}, {0x1fa87,0x1fa8f},
    {0x1faad,0x1faaf}, {0x1fabb,0x1fabf}, {0x1fac6,0x1facf}, {0x1fada,0x1fadf}, {0x1fae8,0x1faef},
    {0x1faf7,0x1faff}, {0x1fb93,0x1fb93}, {0x1fbcb,0x1fbef}, {0x1fbfa,0x1ffff}, {0x2a6e0,0x2a6ff},
    {0x2b739,0x2b73f}, {0x2b81e,0x2b81f}, {0x2cea2,0x2ceaf}, {0x2ebe1,0x2f7ff}, {0x2fa1e,0x2ffff},
    {0x3134b,0xe00ff}, {0xe01f0,0x10ffff},
};

inline bool python_printable(std::uint32_t code) {
  if (code < 0x80) return code >= 0x20 && code != 0x7F;
  const auto* begin = std::begin(kNonPrintable);
  const auto* end = std::end(kNonPrintable);
  const auto* it = std::upper_bound(begin, end, code, [](std::uint32_t c, const std::uint32_t(&r)[2]) { return c < r[0]; });
  return it == begin || code > (*(it - 1))[1];
}

/// Decodes one code point at text[i]; a byte that does not start a well-formed UTF-8 sequence
/// becomes U+DC80..U+DCFF, as Python's surrogateescape error handler reads it.
inline std::uint32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) {
    ++i;
    return c;
  }
  std::size_t extra = 0;
  std::uint32_t code = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (c >= 0xC2 && c <= 0xDF) {
    extra = 1;
    code = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    extra = 2;
    code = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no encoded surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    extra = 3;
    code = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  }
  bool ok = extra != 0;
  if (ok) {
    for (std::size_t k = 1; k <= extra; ++k) {
      if (i + k >= text.size()) {
        ok = false;
        break;
      }
      const unsigned char next = byte(i + k);
      const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (next < min || next > max) {
        ok = false;
        break;
      }
      code = (code << 6) | (next & 0x3F);
    }
  }
  if (!ok) {
    ++i;
    return 0xDC00u + c;
  }
  i += extra + 1;
  return code;
}

inline void append_utf8(std::string& out, std::uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

}  // namespace detail

/// repr(str) of UTF-8 text: single quotes unless the text has ' and no ", backslash escapes
/// for the quote, \\, \t, \n, \r, and \xhh / \uhhhh / \Uhhhhhhhh for what Python deems
/// unprintable; printable non-ASCII is kept as is.
inline std::string python_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += quote;
  for (std::size_t i = 0; i < text.size();) {
    const std::uint32_t code = detail::next_code_point(text, i);
    if (code == static_cast<unsigned char>(quote) || code == '\\') {
      out += '\\';
      out += static_cast<char>(code);
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\r') {
      out += "\\r";
    } else if (detail::python_printable(code)) {
      detail::append_utf8(out, code);
    } else {
      const int digits = code <= 0xFF ? 2 : code <= 0xFFFF ? 4 : 8;
      out += '\\';
      out += digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
      for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += hex[(code >> shift) & 0xF];
    }
  }
  out += quote;
  return out;
}

/// A char is a one-character str (std::int8_t / signed char stay integers).
template <std::same_as<char> T>
inline std::string python_repr(T c) {
  return python_repr(std::string_view(&c, 1));
}

/// repr(tensor) == str(tensor) under set_printoptions(sci_mode=True, linewidth=120); an
/// undefined tensor is None.
inline std::string python_repr(const torch::Tensor& tensor) {
  using detail::python_tuple_repr;
  if (!tensor.defined()) return "None";
  c10::NoGradGuard no_grad;
  const torch::Tensor& t = tensor;
  const std::string prefix = "tensor(";
  const auto indent = static_cast<std::int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  std::string text;

  // Note [Print tensor device] in torch: shown whenever it is not the (CPU) default.
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");

  const auto type = t.scalar_type();
  const auto default_type = c10::typeMetaToScalarType(c10::get_default_dtype());
  const auto default_complex = default_type == torch::kDouble ? torch::kComplexDouble : torch::kComplexFloat;
  const bool has_default_dtype =
      type == default_type || type == default_complex || type == torch::kLong || type == torch::kBool;
  const std::string dtype_suffix = "dtype=" + python_dtype_repr(type);
  const auto with_size = [&](const std::string& body, const torch::Tensor& part) {
    return part.numel() == 0 ? body + ", size=" + python_tuple_repr(part.sizes()) : body;
  };

  if (t.is_sparse()) {
    suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (!t.is_meta()) suffixes.push_back("nnz=" + std::to_string(t._nnz()));
    if (!has_default_dtype) suffixes.push_back(dtype_suffix);
    const std::string indices_prefix = "indices=tensor(", values_prefix = "values=tensor(";
    const auto indices = t._indices().detach();
    const auto values = t._values().detach();
    text = indices_prefix + with_size(detail::tensor_body(indices, indent + static_cast<std::int64_t>(indices_prefix.size())), indices) +
           "),\n" + std::string(static_cast<std::size_t>(indent), ' ') + values_prefix +
           with_size(detail::tensor_body(values, indent + static_cast<std::int64_t>(values_prefix.size())), values) + ")";
  } else if (t.layout() == torch::kSparseCsr || t.layout() == torch::kSparseCsc || t.layout() == torch::kSparseBsr ||
             t.layout() == torch::kSparseBsc) {
    suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    suffixes.push_back("nnz=" + std::to_string(t._nnz()));
    if (!has_default_dtype) suffixes.push_back(dtype_suffix);
    const bool rows = t.layout() == torch::kSparseCsr || t.layout() == torch::kSparseBsr;
    const std::string compressed_prefix = rows ? "crow_indices=tensor(" : "ccol_indices=tensor(";
    const std::string plain_prefix = rows ? "col_indices=tensor(" : "row_indices=tensor(";
    const std::string values_prefix = "values=tensor(";
    const auto compressed = (rows ? t.crow_indices() : t.ccol_indices()).detach();
    const auto plain = (rows ? t.col_indices() : t.row_indices()).detach();
    const auto values = t.values().detach();
    const std::string pad(static_cast<std::size_t>(indent), ' ');
    text = compressed_prefix +
           with_size(detail::tensor_body(compressed, indent + static_cast<std::int64_t>(compressed_prefix.size())), compressed) +
           "),\n" + pad + plain_prefix +
           with_size(detail::tensor_body(plain, indent + static_cast<std::int64_t>(plain_prefix.size())), plain) + "),\n" +
           pad + values_prefix +
           with_size(detail::tensor_body(values, indent + static_cast<std::int64_t>(values_prefix.size())), values) + ")";
  } else if (t.is_quantized()) {
    suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (!has_default_dtype) suffixes.push_back(dtype_suffix);
    const auto scheme = t.qscheme();
    suffixes.push_back(std::string("quantization_scheme=torch.") + c10::toString(scheme));
    if (scheme == c10::kPerTensorAffine || scheme == c10::kPerTensorSymmetric) {
      suffixes.push_back("scale=" + python_repr(t.q_scale()));
      suffixes.push_back("zero_point=" + std::to_string(t.q_zero_point()));
    } else if (scheme == c10::kPerChannelAffine || scheme == c10::kPerChannelSymmetric ||
               scheme == c10::kPerChannelAffineFloatQParams) {
      suffixes.push_back("scale=" + python_repr(t.q_per_channel_scales()));
      suffixes.push_back("zero_point=" + python_repr(t.q_per_channel_zero_points()));
      suffixes.push_back("axis=" + std::to_string(t.q_per_channel_axis()));
    }
    text = detail::tensor_body(t.dequantize(), indent);
  } else if (t.is_meta()) {
    suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (type != default_type) suffixes.push_back(dtype_suffix);
    text = "...";
  } else if (t.numel() == 0) {
    // Explicit shape unless (0,), and dtype even for int64/bool: nothing shows it otherwise.
    if (t.dim() != 1) suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (type != default_type) suffixes.push_back(dtype_suffix);
    text = "[]";
  } else {
    if (!has_default_dtype) suffixes.push_back(dtype_suffix);
    text = detail::tensor_body(t, indent);
  }

  if (t.layout() != torch::kStrided) suffixes.push_back("layout=" + detail::layout_repr(t.layout()));
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + detail::grad_fn_name(t) + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }

  if (t.has_names()) {
    std::string names = "names=(";
    const auto dimnames = t.names();
    for (std::size_t i = 0; i < dimnames.size(); ++i) {
      if (i > 0) names += ", ";
      names += dimnames[i].isWildcard() ? "None" : python_repr(dimnames[i].symbol().toUnqualString());
    }
    if (dimnames.size() == 1) names += ',';
    suffixes.push_back(names + ")");
  }

  std::string out = prefix + text;
  detail::add_suffixes(out, suffixes, indent, t.is_sparse());
  return out;
}

namespace detail {

/// repr() of a 0-d CPU tensor of `type` holding `value`, with no autograd history, made
/// without creating the tensor: "tensor(0.1234)", "tensor(nan, dtype=torch.float16)".
inline std::string scalar_tensor_repr(double value, c10::ScalarType type) {
  ShownData data;
  data.kind = ShownData::Kind::floating;
  data.re.push_back(value);
  std::string out = "tensor(";
  BodyWriter(data, {}, false).write(out, 7);
  std::vector<std::string> suffixes;
  if (type != c10::typeMetaToScalarType(c10::get_default_dtype())) suffixes.push_back("dtype=" + python_dtype_repr(type));
  add_suffixes(out, suffixes, 7, false);
  return out;
}

}  // namespace detail

namespace detail {

/// Calls `line(std::string_view)` for each line of `text`, split at '\n' (a repr has no other
/// line breaks, so this is str.splitlines() for it).
template <class LineFn>
void for_each_line(std::string_view text, LineFn&& line) {
  for (std::size_t start = 0;;) {
    const auto end = text.find('\n', start);
    if (end == std::string_view::npos) {
      line(text.substr(start));
      return;
    }
    line(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace detail

/// print(tensor) as lines (str.splitlines()).
inline std::vector<std::string> python_print_lines(const torch::Tensor& tensor) {
  std::vector<std::string> lines;
  detail::for_each_line(python_repr(tensor), [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

}  // namespace tracetorch
