#pragma once
/// \file
/// What the diff's two rules files share (`--accept RULES`, `--arg-names RULES`): one rule a
/// line, fields separated by spaces or tabs, blank lines and `#` comment lines skipped, errors
/// "FILE:LINE: ..."; and their module patterns, globs (`*` any run of characters, `?` one).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "tracetorch/detail/error.hpp"
#include "tracetorch/detail/io/read_file.hpp"

namespace tracetorch::detail {

/// `*` any run of characters (dots included), `?` one character; everything else literal.
inline bool glob_match(std::string_view pattern, std::string_view text) {
  constexpr auto none = std::string_view::npos;
  std::size_t p = 0, t = 0, star = none, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, resume = t;
    } else if (star != none) {  // let the last star take one more character
      p = star + 1, t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace rules_file {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

/// The next field of `rest` (separated by spaces or tabs); `rest` keeps what follows it.
inline std::string_view next_field(std::string_view& rest) {
  rest = trim(rest);
  const auto end = rest.find_first_of(" \t");
  const auto field = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  return field;
}

/// The error for a bad rule: "tracetorch: FILE:LINE: what".
inline Error line_error(const std::string& file_name, std::size_t line_number, const std::string& what) {
  return Error("tracetorch: " + file_name + ":" + std::to_string(line_number) + ": " + what);
}

/// Calls `rule(line, line_number)` for each line that is neither blank nor a comment, trimmed.
template <class OnRule>
void for_each_rule_line(std::string_view text, OnRule&& rule) {
  std::size_t line_number = 0;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    rule(line, line_number);
  }
}

/// A rules file is a few hundred lines; larger is not a rules file.
inline constexpr std::uint64_t kMaxRulesFileBytes = std::uint64_t(16) << 20;

/// A rules file's text: a regular file of at most kMaxRulesFileBytes (a FIFO, a device or a
/// directory refused before it is read); throws Error naming the file.
inline std::string read(const std::filesystem::path& path) {
  return read_regular_file(path, kMaxRulesFileBytes, "a rules file");
}

}  // namespace rules_file

}  // namespace tracetorch::detail
