#pragma once
/// \file
/// Patch keys compiled as patterns: RE2, which reads Python's `re` syntax (`(?i)`, `(?P<name>...)`,
/// `\d`) except lookaround and backreferences, and matches in linear time. The one RE2 user here.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <re2/re2.h>

#include "tracetorch/capture/patch_registry.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// Registry entries for `mapping`, each key compiled to a `re.search`-like test; an invalid
/// pattern is a tracetorch::Error, before anything is registered.
inline std::vector<PatchEntry> compile_patch_entries(
    const std::vector<std::pair<std::string, PatchReplacement>>& mapping) {
  std::vector<PatchEntry> prepared;
  prepared.reserve(mapping.size());
  for (const auto& [key, value] : mapping) {
    auto pattern = std::make_shared<const re2::RE2>(key, re2::RE2::Quiet);
    if (!pattern->ok()) {
      throw Error("tracetorch: register_patch_mapping: \"" + key + "\" is not a valid pattern: " + pattern->error());
    }
    prepared.push_back({key,
                        [pattern](std::string_view name) {
                          return re2::RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *pattern);
                        },
                        value});
  }
  return prepared;
}

}  // namespace tracetorch::detail
