#pragma once
/// \file
/// JSON text exactly as Python's `json.dump(obj, f, indent=2)` writes it, for trace and summary
/// files that must match the Python reference byte for byte. No LibTorch: text-only tools use it.
//
// Python's layout: ", " / ": " separators with the "," followed by a newline, two-space
// indent, empty containers as {} and [], strings through json_text.hpp (ensure_ascii), floats
// as repr(float).

#include <boost/json.hpp>

#include <cstddef>
#include <string>

#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/text/json_text.hpp"
#include "tracetorch/detail/text/unicode.hpp"  // append_utf8, for users of this header

namespace tracetorch::detail {

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
    case boost::json::kind::double_: out += python_float_repr(value.get_double()); break;
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
