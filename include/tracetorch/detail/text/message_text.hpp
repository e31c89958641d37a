#pragma once
/// \file
/// Names, JSON values and shapes as error messages quote them: escaped and cut short, since
/// they may come from hostile files (megabyte-long or binary keys).

#include <boost/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/text/unicode.hpp"  // append_hex_digits

namespace tracetorch::detail {

/// A name or value as it appears in an error message: quoted, control bytes escaped, and cut
/// short, since hostile headers can hold megabyte-long or binary keys.
inline std::string quoted_for_message(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      append_hex_digits(out, c, 2);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "\"";
}

/// A JSON value for an error message, cut short like quoted_for_message.
inline std::string json_for_message(const boost::json::value& value) {
  std::string text = boost::json::serialize(value);
  if (text.size() > 80) text = text.substr(0, 80) + "...";
  return text;
}

template <class Int>
std::string shape_for_message(const std::vector<Int>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace tracetorch::detail
