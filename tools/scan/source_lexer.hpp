#pragma once
/// \file
/// Reading C++ source as tokens for tracetorch-scan-skipped: enough of the lexer to find string
/// literals (decoded) and names outside comments, with the line each starts on.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tracetorch/detail/text/unicode.hpp>  // append_utf8

#include "common.hpp"

namespace tracetorch::scan_skipped {

enum class TokenKind { identifier, string, punctuation, other };

struct Token {
  TokenKind kind;
  std::string text;  // a string literal's decoded value (UTF-8)
  int line;
};

inline bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {}

  std::vector<Token> tokens() {
    work_steps += text_.size();  // each character is looked at a bounded number of times
    std::vector<Token> out;
    while (pos_ < text_.size()) lex_next(out);
    return out;
  }

 private:
  /// One step from pos_: white space and comments are passed over, anything else is a token.
  void lex_next(std::vector<Token>& out) {
    const char c = text_[pos_];
    if (c == '\n') {
      ++line_;
      ++pos_;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++pos_;
    } else if (starts_with("//")) {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else if (starts_with("/*")) {
      skip_block_comment();
    } else if (const auto prefix = string_prefix(); prefix != std::string_view::npos) {
      out.push_back(string_literal(prefix));
    } else if (c == '\'') {
      skip_char_literal();
    } else if (is_identifier_start(c)) {
      const auto start = pos_;
      while (pos_ < text_.size() && is_identifier_char(text_[pos_])) ++pos_;
      out.push_back({TokenKind::identifier, std::string(text_.substr(start, pos_ - start)), line_});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      out.push_back(number());
    } else {
      out.push_back({TokenKind::punctuation, std::string(1, c), line_});
      ++pos_;
    }
  }

  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  [[noreturn]] void fail(int line, const std::string& why) const {
    throw ScanError(where_ + ":" + std::to_string(line) + ": " + why);
  }

  void count_lines(std::size_t from, std::size_t to) {
    line_ += static_cast<int>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(from),
                                         text_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
  }

  void skip_block_comment() {
    const int start = line_;
    const auto end = text_.find("*/", pos_ + 2);
    if (end == std::string_view::npos) fail(start, "unterminated /* comment");
    count_lines(pos_, end + 2);
    pos_ = end + 2;
  }

  /// A pp-number: digits, letters, '.', digit separators, and exponent signs.
  Token number() {
    const auto start = pos_;
    while (pos_ < text_.size()) {
      const char d = text_[pos_];
      // The character before, within the number: at a file's first byte there is none (this
      // read text_[-1], one byte before the buffer, for a file that begins with a digit).
      const char prev = pos_ > start ? text_[pos_ - 1] : '\0';
      if (is_identifier_char(d) || d == '.' || (d == '\'' && pos_ + 1 < text_.size() && is_identifier_char(text_[pos_ + 1])) ||
          ((d == '+' || d == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P'))) {
        ++pos_;
      } else {
        break;
      }
    }
    return {TokenKind::other, std::string(text_.substr(start, pos_ - start)), line_};
  }

  /// The length of the encoding prefix (u8, u, U, L, each optionally followed by R) when a
  /// string literal starts here, else npos. An identifier like `uR` elsewhere is not a prefix.
  std::size_t string_prefix() const {
    if (pos_ > 0 && is_identifier_char(text_[pos_ - 1])) return std::string_view::npos;
    for (std::string_view prefix : {"u8R", "uR", "UR", "LR", "R", "u8", "u", "U", "L", ""}) {
      if (starts_with(prefix) && pos_ + prefix.size() < text_.size() && text_[pos_ + prefix.size()] == '"') {
        return prefix.size();
      }
    }
    return std::string_view::npos;
  }

  Token string_literal(std::size_t prefix_length) {
    const int start_line = line_;
    const bool raw = prefix_length > 0 && text_[pos_ + prefix_length - 1] == 'R';
    pos_ += prefix_length + 1;  // past the prefix and the opening quote
    std::string value = raw ? raw_string_body(start_line) : quoted_string_body(start_line);
    return {TokenKind::string, std::move(value), start_line};
  }

  /// R"delimiter( ... )delimiter": the text between the parentheses, as written.
  std::string raw_string_body(int start_line) {
    std::string closing = ")";  // ")delimiter\""
    std::size_t open = pos_;
    // At most 16 delimiter characters, none of them space, parenthesis or backslash (the
    // standard's rule): it also keeps the search for the closing sequence linear.
    for (; open < text_.size() && text_[open] != '(' && open - pos_ < 16; ++open) {
      const char d = text_[open];
      if (std::isspace(static_cast<unsigned char>(d)) || d == ')' || d == '\\') break;
      closing += d;
    }
    if (open >= text_.size() || text_[open] != '(') fail(start_line, "malformed raw string literal");
    closing += '"';
    const auto end = text_.find(closing, open + 1);
    if (end == std::string_view::npos) fail(start_line, "unterminated raw string literal");
    std::string value(text_.substr(open + 1, end - open - 1));
    count_lines(pos_, end);
    pos_ = end + closing.size();
    return value;
  }

  /// "...": the characters up to the closing quote on this line, escapes decoded.
  std::string quoted_string_body(int start_line) {
    std::string value;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start_line, "unterminated string literal");
      const char c = text_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        value += c;
        continue;
      }
      escape(value, start_line);
    }
    return value;
  }

  /// One escape sequence after the backslash, decoded into `out`.
  void escape(std::string& out, int line) {
    if (pos_ >= text_.size()) fail(line, "unterminated string literal");
    const char c = text_[pos_++];
    if (simple_escape(out, c)) return;
    if (c == 'x') {
      const auto [value, n] = hex_digits(8);
      if (n == 0 || value > 0xFF) fail(line, "bad \\x escape in a string literal");
      out += static_cast<char>(value);
    } else if (c == 'u' || c == 'U') {
      const std::size_t want = c == 'u' ? 4 : 8;
      const auto [value, n] = hex_digits(want);
      if (n != want || value > 0x10FFFF) fail(line, std::string("bad \\") + c + " escape in a string literal");
      tracetorch::detail::append_utf8(out, value);
    } else if (c >= '0' && c <= '7') {
      octal_escape(out, c);
    } else {
      fail(line, std::string("unknown escape \\") + c + " in a string literal");
    }
  }

  /// The one-character escapes (\n, \", ...) and a line continuation; false for any other.
  bool simple_escape(std::string& out, char c) {
    switch (c) {
      case 'n': out += '\n'; return true;
      case 't': out += '\t'; return true;
      case 'r': out += '\r'; return true;
      case 'a': out += '\a'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'v': out += '\v'; return true;
      case '\\': case '"': case '\'': case '?': out += c; return true;
      case '\n': ++line_; return true;  // a line continuation
      default: return false;
    }
  }

  /// Up to `max` hex digits from pos_: their value and how many there were.
  std::pair<std::uint32_t, std::size_t> hex_digits(std::size_t max) {
    std::uint32_t value = 0;
    std::size_t n = 0;
    while (n < max && pos_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
      const char d = text_[pos_];
      value = value * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(d)) ? d - '0' : (d | 0x20) - 'a' + 10);
      ++pos_;
      ++n;
    }
    return {value, n};
  }

  /// \ooo: the first octal digit `first`, then up to two more.
  void octal_escape(std::string& out, char first) {
    std::uint32_t value = static_cast<std::uint32_t>(first - '0');
    for (int k = 0; k < 2 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7'; ++k) {
      value = value * 8 + static_cast<std::uint32_t>(text_[pos_++] - '0');
    }
    out += static_cast<char>(value);
  }

  void skip_char_literal() {
    const int start = line_;
    ++pos_;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start, "unterminated character literal");
      const char c = text_[pos_++];
      if (c == '\\') {
        // The escaped character must be on this line: a backslash at the end of a line (or of the
        // file) used to skip the newline, or step past the end, and go on reading the next line.
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start, "unterminated character literal");
        ++pos_;
      } else if (c == '\'') {
        return;
      }
    }
  }

  std::string_view text_;
  std::string where_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace tracetorch::scan_skipped
