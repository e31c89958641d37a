#pragma once
/// \file
/// Accept rules (`tracetorch-diff --accept FILE`): reviewed, known differences that are reported
/// with their reason instead of failing. A rule's syntax and its matching (the file's lines and
/// the globs: rules_file.hpp).

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/diff/results.hpp"
#include "tracetorch/diff/rules_file.hpp"

namespace tracetorch {

/// One reviewed, known difference (`tracetorch-diff --accept FILE`, one rule a line):
///
///     # PATTERN                                           KIND        REASON
///     LlamaModel.layers.*.self_attn:inputs.kwargs.past_key_values  non-tensor  the port's cache prints another repr
///     LlamaModel.rotary_emb                               missing-call  the port computes the rotary table inline
///     LlamaModel.layers.*.mlp.up_proj                     order       reviewed: its operands are independent
///
/// PATTERN is MODULE or MODULE:VALUE, globs (`*` any run of characters, dots included; `?` one
/// character) over the module path (after --map) and the value's place in the call (a
/// missing-call or order rule names a module only: the call that is missing, or that ran in
/// another order among its siblings); KIND is one of DiffKind's names; REASON, the rest of the line, is required. A matching difference is
/// reported as accepted with its reason and does not count as a divergence.
struct AcceptRule : RuleLocation {
  std::string module_pattern;
  std::string value_pattern;  ///< empty: any value of the module's calls
  DiffKind kind = DiffKind::values;
  std::string reason;
  std::size_t matched = 0;  ///< in a DiffReport's copy: how many differences it accepted (0: a stale rule)

  std::string pattern() const { return value_pattern.empty() ? module_pattern : module_pattern + ":" + value_pattern; }
};

namespace detail {

/// Whether `rule` covers a difference of `kind` in a call of `module_path`, at value `location`
/// (a call's whole difference: none) or, when the two sides name it differently, `other_location`.
/// The one matching rule of the diff and of module replay.
inline bool rule_matches(const AcceptRule& rule, DiffKind kind, std::string_view module_path,
                         std::optional<std::string_view> location, std::optional<std::string_view> other_location = {}) {
  if (kind != rule.kind || !glob_match(rule.module_pattern, module_path)) return false;
  if (rule.value_pattern.empty() || !location) return true;
  return glob_match(rule.value_pattern, *location) || (other_location && glob_match(rule.value_pattern, *other_location));
}

inline bool rule_matches(const AcceptRule& rule, const TensorDiff& t) {
  const auto kind = t.kind();  // none: the values agree
  return kind && rule_matches(rule, *kind, t.module_path, t.location,
                      t.naming_differs() ? std::optional<std::string_view>(t.candidate_location) : std::nullopt);
}

inline bool rule_matches(const AcceptRule& rule, const CallDiff& c) {
  return rule_matches(rule, DiffKind::missing_call, c.module_path, std::nullopt);
}

/// Marks what the rules accept and counts each rule's matches; a call's acceptance covers its values.
inline void apply_accept_rules(std::vector<AcceptRule>& rules, std::vector<TensorDiff>& values, std::vector<CallDiff>& calls) {
  for (auto& call : calls) {
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (!rule_matches(rules[r], call)) continue;
      call.accepted_by = r;
      ++rules[r].matched;
      break;
    }
  }
  for (auto& value : values) {
    if (!value.mismatched()) continue;
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (!rule_matches(rules[r], value)) continue;
      value.accepted_by = r;
      if (!value.call_missing) ++rules[r].matched;  // a missing call counts once, as the call
      break;
    }
  }
}

namespace accept_rules {

/// One rule from a line that is neither empty nor a comment; throws Error "FILE:LINE: ...".
inline AcceptRule parse_line(std::string_view line, const RuleLocation& where) {
  const auto fail = [&](const std::string& what) { return where.error(what); };
  AcceptRule rule;
  std::string_view rest = line;
  const auto pattern = rules_file::next_field(rest);
  const auto kind = rules_file::next_field(rest);
  rule.reason = std::string(rules_file::trim(rest));
  if (kind.empty()) throw fail("expected PATTERN KIND REASON, got \"" + std::string(line.substr(0, 80)) + "\"");
  const auto colon = pattern.find(':');
  rule.module_pattern = std::string(pattern.substr(0, colon));
  if (colon != std::string_view::npos) rule.value_pattern = std::string(pattern.substr(colon + 1));
  if (rule.module_pattern.empty() || (colon != std::string_view::npos && rule.value_pattern.empty()) ||
      rule.value_pattern.find(':') != std::string::npos) {
    throw fail("pattern \"" + std::string(pattern) + "\" is not MODULE or MODULE:VALUE");
  }
  const auto known = std::find_if(std::begin(kDiffKinds), std::end(kDiffKinds),
                                  [&](DiffKind k) { return kind == to_string(k); });
  if (known == std::end(kDiffKinds)) {
    std::string names;
    for (const auto k : kDiffKinds) names += std::string(names.empty() ? "" : ", ") + to_string(k);
    throw fail("unknown kind \"" + std::string(kind) + "\" (one of " + names + ")");
  }
  rule.kind = *known;
  if ((rule.kind == DiffKind::missing_call || rule.kind == DiffKind::order) && !rule.value_pattern.empty()) {
    throw fail(std::string(rule.kind == DiffKind::order ? "an order" : "a missing-call") + " rule names a module, not a value: \"" +
               std::string(pattern) + "\"");
  }
  // An accepted difference must say why it is acceptable: that is what makes it reviewed.
  if (rule.reason.empty()) throw fail("a rule needs a reason after its kind");
  return rule;
}

}  // namespace accept_rules

}  // namespace detail

/// Parses a rules file's text (see AcceptRule); throws Error "FILE:LINE: what is wrong".
inline std::vector<AcceptRule> parse_accept_rules(std::string_view text, const std::string& file_name) {
  return detail::rules_file::parse_rules<AcceptRule>(text, file_name, detail::accept_rules::parse_line);
}

}  // namespace tracetorch
