#pragma once
/// \file
/// Run-time patch mapping, as transformers' monkey_patching registry: original class names
/// (exact, or regex patterns) mapped to replacement module types, which output capture records
/// instead of the originals once patch_output_recorders was called (tracetorch/capture.hpp).
/// Patterns are RE2, which reads Python's `re` syntax (`(?i)`, `(?P<name>...)`, `\d`) except
/// lookaround and backreferences, and matches in linear time; links -lre2.

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <re2/re2.h>

#include "tracetorch/capture.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch {

/// Maps original class names (exact names or patterns, tried as Python's `re.search`) to
/// replacement types. All-or-nothing: a key already registered (unless `overwrite`) or an
/// invalid pattern is a tracetorch::Error and nothing is registered (upstream warns and treats
/// an invalid pattern as a plain name: refusing it at once is tracetorch's choice).
inline void register_patch_mapping(const std::vector<std::pair<std::string, PatchReplacement>>& mapping,
                                   bool overwrite = false) {
  std::vector<detail::PatchEntry> prepared;
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
  auto& registry = detail::patch_registry();
  std::lock_guard lock(registry.mutex);
  const auto find = [&](const std::string& key) {
    return std::find_if(registry.entries.begin(), registry.entries.end(), [&](const auto& e) { return e.key == key; });
  };
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    const bool twice_here = std::any_of(prepared.begin(), prepared.begin() + static_cast<std::ptrdiff_t>(i),
                                        [&](const auto& e) { return e.key == prepared[i].key; });
    if (!overwrite && (twice_here || find(prepared[i].key) != registry.entries.end())) {
      throw Error("tracetorch: register_patch_mapping: \"" + prepared[i].key +
                  "\" is already registered (pass overwrite = true to replace it)");
    }
  }
  for (auto& entry : prepared) {
    const auto existing = find(entry.key);
    if (existing != registry.entries.end()) {
      *existing = std::move(entry);
    } else {
      registry.entries.push_back(std::move(entry));
    }
  }
}

/// Removes registered keys; a key that is not registered is a tracetorch::Error (and nothing
/// is removed).
inline void unregister_patch_mapping(const std::vector<std::string>& keys) {
  auto& registry = detail::patch_registry();
  std::lock_guard lock(registry.mutex);
  for (const auto& key : keys) {
    if (std::none_of(registry.entries.begin(), registry.entries.end(), [&](const auto& e) { return e.key == key; })) {
      throw Error("tracetorch: unregister_patch_mapping: \"" + key + "\" is not registered");
    }
  }
  std::erase_if(registry.entries, [&](const auto& e) { return std::find(keys.begin(), keys.end(), e.key) != keys.end(); });
}

}  // namespace tracetorch
