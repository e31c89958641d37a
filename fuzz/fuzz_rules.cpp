// libFuzzer target: the rules files of tracetorch-diff on arbitrary text: accept rules
// (`--accept RULES`, diff/accept.hpp), argument-name rules (`--arg-names RULES`,
// diff/arg_names.hpp), both read line by line by diff/rules_file.hpp, and each
// line holding "=>" as a `--map 'REGEX=>REPLACEMENT'` (diff/rename.hpp, RE2). Any input
// must either be refused with tracetorch::Error or give rules that keep what the parsers promise.

#include <tracetorch/diff/accept.hpp>
#include <tracetorch/diff/arg_names.hpp>
#include <tracetorch/diff/rename.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

void check(bool holds) {
  if (!holds) __builtin_trap();
}

std::size_t line_count(std::string_view text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1; }

bool trimmed(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  return s.empty() || (!blank(s.front()) && !blank(s.back()) && s.back() != '\r');
}

void accept_rules(std::string_view text) {
  try {
    const auto rules = tracetorch::parse_accept_rules(text, "fuzz.rules");
    std::size_t previous_line = 0;
    for (const auto& rule : rules) {
      check(rule.line > previous_line && rule.line <= line_count(text));
      previous_line = rule.line;
      check(!rule.module_pattern.empty() && rule.value_pattern.find(':') == std::string::npos);
      check(!rule.reason.empty() && trimmed(rule.reason));
      check(std::find(std::begin(tracetorch::kDiffKinds), std::end(tracetorch::kDiffKinds), rule.kind) !=
            std::end(tracetorch::kDiffKinds));
      check(rule.kind != tracetorch::DiffKind::missing_call || rule.value_pattern.empty());
      // A glob matches itself: '*' and '?' match themselves too.
      check(tracetorch::detail::glob_match(rule.module_pattern, rule.module_pattern));
      check(rule.origin() == "fuzz.rules:" + std::to_string(rule.line));
    }
  } catch (const tracetorch::Error&) {
  }
}

void arg_names_rules(std::string_view text) {
  try {
    const auto rules = tracetorch::parse_arg_names_rules(text, "fuzz.names");
    for (const auto& rule : rules) {
      check(rule.line >= 1 && rule.line <= line_count(text));
      check(!rule.module_pattern.empty() && rule.module_pattern.find(':') == std::string::npos);
      check(!rule.names.empty());
      for (std::size_t i = 0; i < rule.names.size(); ++i) {
        check(tracetorch::detail::arg_names::is_identifier(rule.names[i]));
        check(std::count(rule.names.begin(), rule.names.end(), rule.names[i]) == 1);
        const std::string positional = "args." + std::to_string(i);
        check(tracetorch::detail::keyword_key(rule, positional) == "kwargs." + rule.names[i]);
        check(tracetorch::detail::names_key(rule, "kwargs." + rule.names[i]));
      }
      check(tracetorch::detail::keyword_key(rule, "args." + std::to_string(rule.names.size())) ==
            "args." + std::to_string(rule.names.size()));
      check(tracetorch::detail::glob_match(rule.module_pattern, rule.module_pattern));
    }
  } catch (const tracetorch::Error&) {
  }
}

/// Each line holding "=>" as a --map rule, applied to a module path where it parses.
void map_rules(std::string_view text) {
  for (std::size_t start = 0; start <= text.size();) {
    const auto newline = std::min(text.find('\n', start), text.size());
    const auto line = text.substr(start, newline - start);
    start = newline + 1;
    if (line.find("=>") == std::string_view::npos) continue;
    try {
      const auto rename = tracetorch::PathRename::parse(line);
      const auto renamer = tracetorch::detail::path_renamer({rename});
      renamer("LlamaModel.layers.10.self_attn.q_proj");
      renamer(std::string(line));
    } catch (const tracetorch::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  accept_rules(text);
  arg_names_rules(text);
  map_rules(text);
  return 0;
}
