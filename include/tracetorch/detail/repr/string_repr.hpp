#pragma once
/// \file
/// Python's repr(str) of UTF-8 text, without LibTorch (undecodable bytes as surrogateescape
/// reads them, printability from text/printable.hpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tracetorch/detail/text/printable.hpp"
#include "tracetorch/detail/text/unicode.hpp"

namespace tracetorch::detail {

/// `\xhh`, `\uhhhh` or `\Uhhhhhhhh`, the shortest of the three that holds `code`.
inline void append_python_hex_escape(std::string& out, std::uint32_t code) {
  const int digits = code <= 0xFF ? 2 : code <= 0xFFFF ? 4 : 8;
  out += '\\';
  out += digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
  append_hex_digits(out, code, digits);
}

/// The short escapes of Python's str repr besides the quote.
inline constexpr AsciiEscapes kPythonShortEscapes{{'\\', "\\\\"}, {'\t', "\\t"}, {'\n', "\\n"}, {'\r', "\\r"}};

/// repr(str): single quotes unless the text has ' and no ", backslash escapes for the quote,
/// \\, \t, \n, \r, and hex escapes for what Python deems unprintable; printable non-ASCII is
/// kept as is.
inline std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(text.size() + 2);
  out += quote;
  for (std::size_t i = 0; i < text.size();) {
    const std::uint32_t code = next_code_point(text, i);
    if (code == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += quote;
    } else if (const std::string_view escape = kPythonShortEscapes[code]; !escape.empty()) {
      out += escape;
    } else if (python_printable(code)) {
      append_utf8(out, code);
    } else {
      append_python_hex_escape(out, code);
    }
  }
  out += quote;
  return out;
}

}  // namespace tracetorch::detail
