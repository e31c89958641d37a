#pragma once
/// \file
/// The one HTML escaper of the HTML report: text and attribute values (module paths and values
/// are user data), numbers as the report shows them, and JSON made safe to embed in a <script>.
/// Everything written is well-formed UTF-8 and also parses as XML (the report is polyglot
/// markup, so an XML parser can check that every tag closes).

#include <boost/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "tracetorch/detail/text/json_text.hpp"
#include "tracetorch/detail/text/unicode.hpp"

namespace tracetorch::detail::html {

/// The characters that HTML text and quoted attribute values escape.
inline constexpr AsciiEscapes kHtmlEscapes{{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}};

/// Appends `text` escaped for HTML text and quoted attribute values. Ill-formed UTF-8 becomes
/// U+FFFD (a browser would show that; an XML parser would refuse the file), and control
/// characters that XML 1.0 forbids are shown as `\xNN`.
inline void append_escaped(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (const std::string_view escape = kHtmlEscapes[byte]; !escape.empty()) {
        out += escape;
      } else if (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r') {
        out += "\\x";
        append_hex_digits(out, byte, 2);
      } else {
        out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    const Utf8Step step = decode_utf8(text, i);
    if (step.valid) {
      out.append(text.data() + i, step.length);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += step.length;
  }
}

inline std::string escaped(std::string_view text) {
  std::string out;
  append_escaped(out, text);
  return out;
}

/// A number as the report's tables show it: "1.234e-05", "inf", "-inf", "nan".
inline std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3e", v);
  return buffer;
}

/// A JSON number, or one of the strings "inf", "-inf", "nan" the reports write for non-finite
/// numbers; nullopt for anything else.
inline std::optional<double> json_number(const boost::json::value& v) {
  if (v.is_number()) return v.to_number<double>();
  if (const auto* s = v.if_string()) {
    if (*s == "inf") return HUGE_VAL;
    if (*s == "-inf") return -HUGE_VAL;
    if (*s == "nan") return std::nan("");
  }
  return std::nullopt;
}

/// A coordinate for SVG attributes: short, fixed-point, never "nan".
inline std::string coordinate(double v) {
  if (!std::isfinite(v)) v = 0;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

/// `open`, each item through `append_item` with commas between, `close`.
template <class Items, class AppendItem>
void append_separated(std::string& out, char open, const Items& items, char close, AppendItem append_item) {
  out += open;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += ',';
    first = false;
    append_item(item);
  }
  out += close;
}

/// Appends `v` as JSON text that can sit inside <script type="application/json">: all ASCII
/// (strings through the trace writer's escaper), with '<', '>' and '&' as \u escapes so that
/// neither "</script>" nor an XML entity can appear; non-finite doubles as "inf"/"nan" strings.
inline void append_script_json(std::string& out, const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null: out += "null"; return;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; return;
    case boost::json::kind::int64: out += std::to_string(v.get_int64()); return;
    case boost::json::kind::uint64: out += std::to_string(v.get_uint64()); return;
    case boost::json::kind::double_: {
      const double d = v.get_double();
      if (!std::isfinite(d)) {
        out += "\"" + number_text(d) + "\"";
        return;
      }
      char buffer[32];
      const auto end = std::to_chars(buffer, buffer + sizeof buffer, d).ptr;
      out.append(buffer, end);
      return;
    }
    case boost::json::kind::string: {
      std::string literal;
      append_json_string(literal, v.get_string());
      for (const char c : literal) {
        if (c == '<') out += "\\u003c";
        else if (c == '>') out += "\\u003e";
        else if (c == '&') out += "\\u0026";
        else out += c;
      }
      return;
    }
    case boost::json::kind::array:
      append_separated(out, '[', v.get_array(), ']', [&](const auto& item) { append_script_json(out, item); });
      return;
    case boost::json::kind::object:
      append_separated(out, '{', v.get_object(), '}', [&](const auto& entry) {
        append_script_json(out, boost::json::string(entry.key()));
        out += ':';
        append_script_json(out, entry.value());
      });
      return;
  }
}

}  // namespace tracetorch::detail::html
