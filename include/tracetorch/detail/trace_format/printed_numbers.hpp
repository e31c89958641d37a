#pragma once
/// \file
/// The numbers of a printed tensor (a use_repr=true trace's value: Python's print(tensor)),
/// each with the precision its printed digits allow. No LibTorch here: the trace fuzzer runs it.

#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tracetorch::detail {

/// A number read from Python's print of a tensor, with the uncertainty of its printed form:
/// half a unit in its last printed digit (0 for integers and integer-valued floats).
struct PrintedNumber {
  double value = 0;
  double half_unit = 0;
};

namespace printed {

/// The text between "tensor(" and the first keyword argument (", dtype=", ", size=", ...), in
/// `text` (the lines joined); nullopt for text that is not a printed tensor.
inline std::optional<std::string_view> values_text(const std::vector<std::string>& lines, std::string& text) {
  for (const auto& line : lines) text += line, text += '\n';
  std::string_view body(text);
  if (!body.starts_with("tensor(")) return std::nullopt;
  body.remove_prefix(7);
  if (const auto equals = body.find('='); equals != std::string_view::npos) {
    const auto comma = body.rfind(',', equals);
    if (comma == std::string_view::npos) return std::nullopt;
    body = body.substr(0, comma);
  }
  return body;
}

/// inf, nan, True or False at the start of `rest`: appends it, returns its length (0: none).
inline std::size_t read_word(std::string_view rest, bool negative, std::vector<PrintedNumber>& out) {
  const auto word = [&](std::string_view w) { return rest.starts_with(w); };
  if (!(word("inf") || word("nan") || word("True") || word("False"))) return 0;
  const std::size_t length = word("inf") || word("nan") ? 3 : word("True") ? 4 : 5;
  double v = word("inf") ? HUGE_VAL : word("nan") ? std::nan("") : word("True") ? 1.0 : 0.0;
  out.push_back({negative ? -v : v, 0.0});
  return length;
}

/// The decimal number starting at `body[start]` (its sign already read): appends it with its
/// half unit, returns where it ends; nullopt for anything else.
inline std::optional<std::size_t> read_number(std::string_view body, std::size_t start, bool negative,
                                              std::vector<PrintedNumber>& out) {
  const auto is_digit = [&](std::size_t k) { return k < body.size() && body[k] >= '0' && body[k] <= '9'; };
  std::size_t k = start;
  while (is_digit(k)) ++k;
  if (k == start) return std::nullopt;
  std::size_t fraction_digits = 0;
  bool has_point = false;
  if (k < body.size() && body[k] == '.') {
    has_point = true;
    ++k;
    while (is_digit(k)) ++k, ++fraction_digits;
  }
  long exponent = 0;
  if (k < body.size() && (body[k] == 'e' || body[k] == 'E')) {
    std::size_t e = k + 1;
    if (e < body.size() && (body[e] == '+' || body[e] == '-')) ++e;
    if (!is_digit(e)) return std::nullopt;
    const auto [end, ec] = std::from_chars(body.data() + (body[k + 1] == '+' ? k + 2 : k + 1), body.data() + body.size(), exponent);
    if (ec != std::errc()) return std::nullopt;
    k = static_cast<std::size_t>(end - body.data());
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(body.data() + start, body.data() + k, v);
  if (ec == std::errc::result_out_of_range) {
    v = HUGE_VAL;  // a printed value beyond double's range: still a number, compared as inf
  } else if (ec != std::errc() || end != body.data() + k) {
    return std::nullopt;
  }
  double half_unit = 0;
  if (has_point && fraction_digits > 0) {
    half_unit = 0.5 * std::pow(10.0, static_cast<double>(exponent) - static_cast<double>(fraction_digits));
  }
  out.push_back({negative ? -v : v, half_unit});
  return k;
}

}  // namespace printed

/// The numbers in the printed lines of one tensor (`tensor([[ 1.2345e-01, ...]])`), in print
/// order; summarised prints ("...") hold only the edge items. A complex element gives two
/// numbers, its real part then its imaginary part (`tensor([1.0000+2.j])`: 1, 2). Text after the values
/// (`dtype=torch.float64`, `size=(0, 3)`) is skipped. Returns false for text that is not a
/// printed tensor.
inline bool parse_printed_numbers(const std::vector<std::string>& lines, std::vector<PrintedNumber>& out) {
  std::string text;
  const auto values = printed::values_text(lines, text);
  if (!values) return false;
  const std::string_view body = *values;
  out.clear();
  std::size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (c == ' ' || c == '\n' || c == '[' || c == ']' || c == ',' || c == ')') {
      ++i;
      continue;
    }
    if (body.substr(i, 3) == "...") {
      i += 3;
      continue;
    }
    bool negative = false;
    std::size_t start = i;
    if (c == '-' || c == '+') negative = c == '-', ++start;
    std::size_t end = start + printed::read_word(body.substr(start), negative, out);
    if (end == start) {
      const auto number_end = printed::read_number(body, start, negative, out);
      if (!number_end) return false;
      end = *number_end;
    }
    // A complex element prints as its real part, then its imaginary part with a sign and a 'j'
    // ("-3.5000-4.j", "nan+infj"): both are numbers, in view_as_real's order.
    if (end < body.size() && body[end] == 'j') ++end;
    i = end;
  }
  return true;
}

}  // namespace tracetorch::detail
