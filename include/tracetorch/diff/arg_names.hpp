#pragma once
/// \file
/// Argument-name rules (`tracetorch-diff --arg-names RULES`): for the calls of some modules,
/// positional argument N is the keyword NAME, so that `inputs.args.N` on one side meets
/// `inputs.kwargs.NAME` on the other whatever order the keywords were recorded in. A rule's
/// syntax, its parsing, and the keyword name it gives a positional value.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/diff/rules_file.hpp"

namespace tracetorch {

/// One line of an argument-name rules file (`tracetorch-diff --arg-names RULES`):
///
///     # MODULE                          NAMES: forward's parameters, in order, comma-separated
///     LlamaModel.layers.*.self_attn     hidden_states,position_embeddings,attention_mask
///
/// MODULE is a glob (`*` any run of characters, dots included; `?` one character) over the module
/// path after --map, as in accept rules. For the calls it matches (the first matching rule in
/// order applies), `inputs.args.N` is the same value as `inputs.kwargs.NAMES[N]` on either side:
/// where the rule names a value, the rule decides its partner, even against the recorded order.
struct ArgNamesRule : RuleLocation {
  std::string module_pattern;
  std::vector<std::string> names;  ///< names[N]: the keyword of positional argument N
  std::size_t calls = 0;    ///< in a DiffReport's copy: the aligned calls it applied to
  std::size_t matched = 0;  ///< in a DiffReport's copy: values whose partner it decided (0: a stale rule)

  /// "hidden_states,attention_mask", as written.
  std::string names_text() const {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
    return out;
  }
};

namespace detail {

namespace arg_names {

inline bool is_identifier(std::string_view name) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (name.empty() || !letter(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return letter(c) || digit(c); });
}

/// "a,b,c" -> {"a", "b", "c"}; throws (through `fail`) for an empty, repeated or non-identifier name.
template <class Fail>
std::vector<std::string> parse_names(std::string_view text, const Fail& fail) {
  std::vector<std::string> names;
  for (std::string_view rest = text;;) {
    const auto comma = rest.find(',');
    const std::string name(rest.substr(0, comma));
    if (!is_identifier(name)) {
      throw fail(name.empty() ? "an empty name in \"" + std::string(text) + "\" (NAMES is NAME,NAME,... without spaces)"
                              : "\"" + name + "\" is not a Python identifier");
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) throw fail("\"" + name + "\" is named twice");
    names.push_back(name);
    if (comma == std::string_view::npos) return names;
    rest.remove_prefix(comma + 1);
  }
}

/// One rule from a line that is neither blank nor a comment; throws Error "FILE:LINE: ...".
inline ArgNamesRule parse_line(std::string_view line, const RuleLocation& where) {
  const auto fail = [&](const std::string& what) { return where.error(what); };
  std::string_view rest = line;
  const auto pattern = rules_file::next_field(rest);
  const auto names = rules_file::next_field(rest);
  if (names.empty() || !rules_file::trim(rest).empty()) {
    throw fail("expected MODULE NAME,NAME,... (no spaces in the list), got \"" + std::string(line.substr(0, 80)) + "\"");
  }
  // A rule names a module's positional arguments: a value pattern (accept rules' MODULE:VALUE) has no meaning here.
  if (pattern.find(':') != std::string_view::npos) throw fail("pattern \"" + std::string(pattern) + "\" is a MODULE, not MODULE:VALUE");
  ArgNamesRule rule;
  rule.module_pattern = std::string(pattern);
  rule.names = parse_names(names, fail);
  return rule;
}

}  // namespace arg_names

/// The first rule (in order) whose pattern matches `module_path`.
inline std::optional<std::size_t> arg_names_rule_for(std::span<const ArgNamesRule> rules, const std::string& module_path) {
  for (std::size_t r = 0; r < rules.size(); ++r) {
    if (glob_match(rules[r].module_pattern, module_path)) return r;
  }
  return std::nullopt;
}

/// N for a top-level input key "args.N"; none for "kwargs.NAME" or anything else.
inline std::optional<std::size_t> positional_index(std::string_view key) {
  const std::string prefix = std::string(trace_format::kArgs) + trace_format::kLocationSeparator;
  if (!key.starts_with(prefix) || key.size() == prefix.size()) return std::nullopt;
  std::size_t index = 0;
  for (const char c : key.substr(prefix.size())) {
    if (c < '0' || c > '9' || index > 1'000'000) return std::nullopt;
    index = index * 10 + static_cast<std::size_t>(c - '0');
  }
  return index;
}

/// The keyword the rule gives a top-level input key: "args.1" -> "kwargs.NAMES[1]"; the key
/// itself where the rule says nothing of it.
inline std::string keyword_key(const ArgNamesRule& rule, const std::string& key) {
  const auto index = positional_index(key);
  if (!index || *index >= rule.names.size()) return key;
  return std::string(trace_format::kKwargs) + trace_format::kLocationSeparator + rule.names[*index];
}

/// The rule names this top-level input: a positional argument it lists, or one of its keywords.
inline bool names_key(const ArgNamesRule& rule, const std::string& key) {
  const std::string keyword_prefix = std::string(trace_format::kKwargs) + trace_format::kLocationSeparator;
  if (key.starts_with(keyword_prefix)) {
    return std::find(rule.names.begin(), rule.names.end(), key.substr(keyword_prefix.size())) != rule.names.end();
  }
  return keyword_key(rule, key) != key;
}

}  // namespace detail

/// Parses an argument-name rules file's text (see ArgNamesRule); throws Error "FILE:LINE: what is wrong".
inline std::vector<ArgNamesRule> parse_arg_names_rules(std::string_view text, const std::string& file_name) {
  return detail::rules_file::parse_rules<ArgNamesRule>(text, file_name, detail::arg_names::parse_line);
}

}  // namespace tracetorch
