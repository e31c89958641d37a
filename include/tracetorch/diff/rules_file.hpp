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
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/read_file.hpp"

namespace tracetorch {

/// Where a rule was written (the first part of AcceptRule and ArgNamesRule), for messages.
struct RuleLocation {
  std::string file;
  std::size_t line = 0;

  /// "FILE:LINE".
  std::string origin() const { return file + ":" + std::to_string(line); }
  /// The error for a bad rule: "tracetorch: FILE:LINE: what".
  Error error(const std::string& what) const { return Error("tracetorch: " + origin() + ": " + what); }
};

}  // namespace tracetorch

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

/// One rule for each line of `text` that is neither blank nor a comment: `parse_line(line,
/// where)` with the line trimmed (it throws `where.error(...)` for a bad one), then `where`.
template <class Rule, class ParseLine>
std::vector<Rule> parse_rules(std::string_view text, const std::string& file_name, ParseLine parse_line) {
  std::vector<Rule> rules;
  RuleLocation where{file_name, 0};
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++where.line;
    if (line.empty() || line.front() == '#') continue;
    Rule rule = parse_line(line, where);
    static_cast<RuleLocation&>(rule) = where;
    rules.push_back(std::move(rule));
  }
  return rules;
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
