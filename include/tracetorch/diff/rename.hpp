#pragma once
/// \file
/// Renaming module paths before two traces are aligned (`tracetorch-diff --map`): one rule's
/// syntax, its RE2 form, and the renaming of a path by all rules in order.

#include <re2/re2.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"

namespace tracetorch {

/// One `--map 'REGEX=>REPLACEMENT'`: module paths are rewritten (every match, `$1` for groups,
/// `$&` for the match, `$$` for a dollar) on both sides before alignment, so a port whose
/// modules are named differently (`Model.blocks.3`) can meet its reference (`LlamaModel.layers.3`).
/// Patterns are RE2: Python's syntax, linear time whatever the path's length.
struct PathRename {
  std::string pattern;
  std::string replacement;

  /// Splits "REGEX=>REPLACEMENT" at the first "=>"; throws Error for a missing "=>", a bad
  /// pattern or a replacement naming a group the pattern does not have.
  static PathRename parse(std::string_view spec) {
    const auto arrow = spec.find("=>");
    if (arrow == std::string_view::npos) {
      throw Error("tracetorch: --map " + std::string(spec) + ": expected 'REGEX=>REPLACEMENT'");
    }
    PathRename rename{std::string(spec.substr(0, arrow)), std::string(spec.substr(arrow + 2))};
    const auto compiled = rename.compiled();  // validates now, not at the first path
    if (std::string error; !compiled->CheckRewriteString(rename.rewrite(), &error)) {
      throw Error("tracetorch: --map " + std::string(spec) + ": " + error);
    }
    return rename;
  }

  std::shared_ptr<const re2::RE2> compiled() const {
    auto compiled = std::make_shared<const re2::RE2>(pattern, re2::RE2::Quiet);
    if (!compiled->ok()) {
      throw Error("tracetorch: --map " + pattern + "=>" + replacement + ": invalid regex: " + compiled->error());
    }
    return compiled;
  }

  /// The replacement in RE2's rewrite syntax (`\1`, `\0`, `\\`).
  std::string rewrite() const {
    std::string out;
    for (std::size_t i = 0; i < replacement.size(); ++i) {
      const char c = replacement[i];
      const char next = i + 1 < replacement.size() ? replacement[i + 1] : '\0';
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '$' && next >= '0' && next <= '9') {
        out += '\\';
        out += next;
        ++i;
      } else if (c == '$' && next == '&') {
        out += "\\0";
        ++i;
      } else if (c == '$' && next == '$') {
        out += '$';
        ++i;
      } else {
        out += c;
      }
    }
    return out;
  }
};

namespace detail {

/// The renaming of a module path by `renames`, applied in order (each compiled once).
inline std::function<std::string(std::string)> path_renamer(const std::vector<PathRename>& renames) {
  std::vector<std::pair<std::shared_ptr<const re2::RE2>, std::string>> rewrites;
  for (const auto& rename : renames) rewrites.emplace_back(rename.compiled(), rename.rewrite());
  return [rewrites = std::move(rewrites)](std::string path) {
    for (const auto& [pattern, rewrite] : rewrites) re2::RE2::GlobalReplace(&path, *pattern, rewrite);
    return path;
  };
}

}  // namespace detail

}  // namespace tracetorch
