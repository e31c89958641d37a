#pragma once
/// \file
/// The one JSON string writer of tracetorch (traces, summaries and safetensors headers alike):
/// a string literal as Python's json.dumps writes it with its default ensure_ascii=True.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tracetorch/detail/text/unicode.hpp"

namespace tracetorch::detail {

/// The end of the run of bytes from `i` that json.dumps copies unchanged: printable ASCII
/// other than '"' and '\\'. Traces are mostly that (a printed tensor is tens of kilobytes of
/// it), so eight bytes are checked at once while none of them needs a look of its own.
inline std::size_t json_plain_run_end(std::string_view text, std::size_t i) {
  constexpr std::uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  // Per byte, the high bit of each term says: below 0x20, at least 0x7F, '"', '\\'. Exact when
  // no byte is below 0x20 or above 0x7E (no borrow or carry crosses bytes); otherwise the
  // word is flagged anyway and the bytes are looked at one by one below.
  const auto equal_to = [](std::uint64_t word, unsigned char byte) {
    const std::uint64_t diff = word ^ (ones * byte);
    return (diff - ones) & ~diff;
  };
  while (text.size() - i >= 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    const std::uint64_t special =
        ((word - ones * 0x20) & ~word) | (word + ones) | word | equal_to(word, '"') | equal_to(word, '\\');
    if ((special & highs) != 0) break;
    i += 8;
  }
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte >= 0x7F || byte == '"' || byte == '\\') break;
    ++i;
  }
  return i;
}

/// `\uXXXX` with lowercase hex, one UTF-16 code unit.
inline void append_json_u_escape(std::string& out, std::uint32_t unit) {
  out += "\\u";
  append_hex_digits(out, unit, 4);
}

/// json.dumps' short escapes.
inline constexpr AsciiEscapes kJsonShortEscapes{{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\r', "\\r"},
                                              {'\t', "\\t"},  {'\b', "\\b"},   {'\f', "\\f"}};

/// One code point that is not plain printable ASCII: the short escapes json.dumps uses, else
/// `\uXXXX`, as a UTF-16 surrogate pair above U+FFFF.
inline void append_json_escaped(std::string& out, std::uint32_t code) {
  if (const std::string_view escape = kJsonShortEscapes[code]; !escape.empty()) {
    out += escape;
    return;
  }
  if (code < 0x10000) {
    append_json_u_escape(out, code);
    return;
  }
  code -= 0x10000;
  append_json_u_escape(out, 0xD800 + (code >> 10));
  append_json_u_escape(out, 0xDC00 + (code & 0x3FF));
}

/// Appends `text` (UTF-8) as a JSON string literal, byte for byte as Python's
/// `json.dumps(text)` writes it: printable ASCII as is, the short escapes for '"', '\\', \n,
/// \r, \t, \b and \f, everything else (other control characters, DEL, non-ASCII) as
/// lowercase `\uXXXX`, with surrogate pairs above U+FFFF.
///
/// Ill-formed UTF-8 (which a Python str cannot hold) is written as Python writes
/// `json.dumps(data.decode("utf-8", "replace"))`: each maximal ill-formed run (see
/// decode_utf8) becomes one `\ufffd`, so b"a\xe2\x82z" gives "a\ufffdz" and b"\xc0\x80" gives
/// "\ufffd\ufffd". Not surrogateescape's `\udcXX`: a lone surrogate escape is refused by
/// strict JSON readers (Boost.JSON, serde_json), and the text must stay readable by them.
/// Returns whether `text` was well-formed, for writers that must refuse it instead.
inline bool append_json_string(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  bool well_formed = true;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t plain_end = json_plain_run_end(text, i);
    if (plain_end != i) {
      out.append(text.data() + i, plain_end - i);
      i = plain_end;
      continue;
    }
    const Utf8Step step = decode_utf8(text, i);
    i += step.length;
    if (!step.valid) well_formed = false;
    append_json_escaped(out, step.valid ? step.code : 0xFFFD);
  }
  out += '"';
  return well_formed;
}

}  // namespace tracetorch::detail
