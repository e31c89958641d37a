#pragma once
// JSON text exactly as Python's `json.dump(obj, f, indent=2)` writes it: ", "/": " separators
// folded to "," + newline, two-space indent, empty containers as {} and [], ensure_ascii
// escapes (\uXXXX, surrogate pairs above the BMP), floats as Python's repr.

#include <boost/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "tracetorch/python_repr.hpp"

namespace tracetorch::detail {

inline void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto append_u = [&](std::uint32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex[(unit >> shift) & 0xF];
  };
  out += '"';
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      continue;
    }
    if (c < 0x80) {  // other control characters and DEL
      append_u(c);
      continue;
    }
    // Decode one UTF-8 sequence; a malformed byte is escaped as U+FFFD rather than dropped.
    std::uint32_t code = 0xFFFD;
    std::size_t extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (extra != 0) {
      std::uint32_t value = c & (0x3F >> extra);
      bool ok = true;
      for (std::size_t k = 1; k <= extra; ++k) {
        if (i + k >= text.size()) { ok = false; break; }
        const auto next = static_cast<unsigned char>(text[i + k]);
        if ((next & 0xC0) != 0x80) { ok = false; break; }
        value = (value << 6) | (next & 0x3F);
      }
      if (ok) {
        code = value;
        i += extra;
      }
    }
    if (code >= 0x10000) {
      code -= 0x10000;
      append_u(0xD800 + (code >> 10));
      append_u(0xDC00 + (code & 0x3FF));
    } else {
      append_u(code);
    }
  }
  out += '"';
}

/// Writes `value` as `json.dump(value, indent=2)` would; when `strip_values`, every object key
/// "value" is left out (the _SUMMARY.json view).
inline void append_python_json(std::string& out, const boost::json::value& value, int depth, bool strip_values) {
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<std::size_t>(level) * 2, ' ');
  };
  switch (value.kind()) {
    case boost::json::kind::null: out += "null"; break;
    case boost::json::kind::bool_: out += value.get_bool() ? "true" : "false"; break;
    case boost::json::kind::int64: out += std::to_string(value.get_int64()); break;
    case boost::json::kind::uint64: out += std::to_string(value.get_uint64()); break;
    case boost::json::kind::double_: out += python_repr(value.get_double()); break;
    case boost::json::kind::string: append_json_string(out, value.get_string()); break;
    case boost::json::kind::array: {
      const auto& array = value.get_array();
      if (array.empty()) {
        out += "[]";
        break;
      }
      out += '[';
      bool first = true;
      for (const auto& element : array) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        append_python_json(out, element, depth + 1, strip_values);
      }
      newline(depth);
      out += ']';
      break;
    }
    case boost::json::kind::object: {
      const auto& object = value.get_object();
      bool first = true;
      for (const auto& entry : object) {
        if (strip_values && entry.key() == "value") continue;
        out += first ? "{" : ",";
        first = false;
        newline(depth + 1);
        append_json_string(out, entry.key());
        out += ": ";
        append_python_json(out, entry.value(), depth + 1, strip_values);
      }
      if (first) {
        out += "{}";
      } else {
        newline(depth);
        out += '}';
      }
      break;
    }
  }
}

}  // namespace tracetorch::detail
