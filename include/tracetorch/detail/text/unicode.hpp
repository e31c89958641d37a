#pragma once
/// \file
/// The one UTF-8 decoder and encoder of tracetorch: well-formed UTF-8 as the Unicode standard
/// defines it, with the maximal-subpart rule for what is not, so every caller agrees on validity;
/// and how its escapers (JSON, Python's repr, HTML) spell escapes: hex digits, short-escape tables.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace tracetorch::detail {

/// The low `digits` hex digits of `value`, lowercase: how every escape tracetorch writes spells
/// them (`\xNN` in messages and HTML, `\uNNNN` in JSON, Python's `\x`/`\u`/`\U`).
inline void append_hex_digits(std::string& out, std::uint32_t value, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += hex[(value >> shift) & 0xF];
}

/// An escaper's table of short escapes: what it writes for an ASCII character, or nothing where
/// the character has none (the escaper's own rule then decides). Built at compile time, as
/// `constexpr AsciiEscapes kEscapes{{'\n', "\\n"}, ...};`, and read in one lookup.
class AsciiEscapes {
 public:
  constexpr AsciiEscapes(std::initializer_list<std::pair<char, std::string_view>> entries) {
    // at(): an entry that is not ASCII is a compile error in a constexpr table, not a wrong slot.
    for (const auto& [character, escape] : entries) escapes_.at(static_cast<unsigned char>(character)) = escape;
  }
  /// The short escape of `code`, empty where it has none.
  constexpr std::string_view operator[](std::uint32_t code) const {
    return code < escapes_.size() ? escapes_[code] : std::string_view();
  }

 private:
  std::array<std::string_view, 128> escapes_{};
};

/// One step of decoding: a code point, or an ill-formed run of bytes.
struct Utf8Step {
  std::uint32_t code = 0;  ///< the code point; for an ill-formed run, its first byte
  std::size_t length = 1;  ///< bytes consumed: the sequence, or the ill-formed run (>= 1)
  bool valid = true;
};

/// Decodes the sequence at text[i] (i < text.size()). Well-formed means shortest form, no
/// encoded surrogates and nothing above U+10FFFF. An ill-formed run is the longest prefix of a
/// well-formed sequence found there, at least one byte (the "maximal subpart" of Unicode's
/// U+FFFD substitution practice, which Python's UTF-8 decoder follows).
inline Utf8Step decode_utf8(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {lead, 1, true};
  std::size_t extra = 0;
  std::uint32_t code = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    extra = 1;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    extra = 2;
    code = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no encoded surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    extra = 3;
    code = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {lead, 1, false};  // a continuation byte, C0, C1 or F5..FF cannot start a sequence
  }
  for (std::size_t k = 1; k <= extra; ++k) {
    if (i + k >= text.size()) return {lead, k, false};
    const auto next = static_cast<unsigned char>(text[i + k]);
    if (next < (k == 1 ? lo : 0x80) || next > (k == 1 ? hi : 0xBF)) return {lead, k, false};
    code = (code << 6) | (next & 0x3F);
  }
  return {code, extra + 1, true};
}

/// Decodes one code point at text[i] and moves i past it; a byte that does not start a
/// well-formed sequence becomes U+DC80..U+DCFF, as Python's surrogateescape error handler
/// reads it (each byte of an ill-formed run on its own).
inline std::uint32_t next_code_point(std::string_view text, std::size_t& i) {
  const Utf8Step step = decode_utf8(text, i);
  if (!step.valid) {
    ++i;
    return 0xDC00u + step.code;
  }
  i += step.length;
  return step.code;
}

/// Appends `code` (at most U+10FFFF) as UTF-8.
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

}  // namespace tracetorch::detail
