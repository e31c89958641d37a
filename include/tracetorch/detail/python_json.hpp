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
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size(); ++i) {
    // Printable ASCII other than '"' and '\\' is copied as is, a whole run at a time: traces
    // are mostly that, and appending byte by byte dominated the JSON writing.
    std::size_t plain = i;
    while (plain < text.size()) {
      const auto byte = static_cast<unsigned char>(text[plain]);
      if (byte < 0x20 || byte >= 0x7F || byte == '"' || byte == '\\') break;
      ++plain;
    }
    if (plain != i) {
      out.append(text.data() + i, plain - i);
      i = plain;
      if (i == text.size()) break;
    }
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

inline void append_python_json(std::string& out, const boost::json::value& value, int depth, bool strip_values);

/// An object as `json.dump(indent=2)` writes it. Its own overload, so that writing a
/// boost::json::object does not first copy it into a boost::json::value.
inline void append_python_json(std::string& out, const boost::json::object& object, int depth, bool strip_values) {
  bool first = true;
  for (const auto& entry : object) {
    if (strip_values && entry.key() == "value") continue;
    out += first ? "{" : ",";
    first = false;
    out += '\n';
    out.append(static_cast<std::size_t>(depth + 1) * 2, ' ');
    append_json_string(out, entry.key());
    out += ": ";
    append_python_json(out, entry.value(), depth + 1, strip_values);
  }
  if (first) {
    out += "{}";
  } else {
    out += '\n';
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += '}';
  }
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
    case boost::json::kind::object: append_python_json(out, value.get_object(), depth, strip_values); break;
  }
}

}  // namespace tracetorch::detail
