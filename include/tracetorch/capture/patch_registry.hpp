#pragma once
/// \file
/// The run-time patch registry (transformers' monkey_patching): class names or patterns mapped
/// to replacement module types; all its reads and writes. Patterns arrive compiled
/// (patch_pattern.hpp), so this file needs no regex library.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tracetorch/detail/capture/replacement_builder.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/traceable.hpp"

namespace tracetorch {

/// A replacement module type, as a registry value: `tracetorch::replacement<FusedAttention>()`.
struct PatchReplacement {
  std::type_index type;
  std::string name;
  /// isinstance(module, replacement): once patched, a recorder records the replacement's
  /// subclasses too, as upstream's isinstance test on the swapped-in target class.
  bool (*is_instance)(const torch::nn::Module&) = nullptr;
  /// How tracetorch::make_replaceable builds it in place of the original (none: recording only).
  detail::ReplacementBuilder builder{};
};

namespace detail {

template <class Impl>
bool is_module_of(const torch::nn::Module& module) {
  return dynamic_cast<const Impl*>(&module) != nullptr;
}

template <class T, class... Args>
PatchReplacement replacement_for() {
#ifdef TRACETORCH_DISABLE
  return {std::type_index(typeid(T)), std::string(), nullptr, replacement_builder<T, Args...>()};
#else
  static_assert(is_traceable_v<T>, "tracetorch::replacement: the replacement type was never declared TRACEABLE");
  using Traced = traced_type_t<T>;
  return {std::type_index(typeid(Traced)), std::string(Traced::registered_name), &is_module_of<typename Traced::ImplType>,
          replacement_builder<T, Args...>()};
#endif
}

struct PatchEntry {
  std::string key;
  // The compiled pattern behind a function, so that matching needs no regex header here.
  std::function<bool(std::string_view)> matches;
  PatchReplacement replacement;
};

struct PatchRegistry {
  std::mutex mutex;
  std::vector<PatchEntry> entries;  // registration order; an overwritten key keeps its place
};

inline PatchRegistry& patch_registry() {
  static PatchRegistry registry;
  return registry;
}

/// An exact key first, then the first pattern (in registration order) that matches.
inline std::optional<PatchReplacement> find_patch_replacement(std::string_view class_name) {
  auto& registry = patch_registry();
  std::lock_guard lock(registry.mutex);
  for (const auto& entry : registry.entries) {
    if (entry.key == class_name) return entry.replacement;
  }
  for (const auto& entry : registry.entries) {
    if (entry.matches(class_name)) return entry.replacement;
  }
  return std::nullopt;
}

inline auto find_patch_key(std::vector<PatchEntry>& entries, const std::string& key) {
  return std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.key == key; });
}

/// Refuses a key given twice, or already registered, unless `overwrite`: before anything changes.
inline void check_new_patch_keys(const std::vector<PatchEntry>& prepared, std::vector<PatchEntry>& registered,
                                 bool overwrite) {
  if (overwrite) return;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    const bool twice_here = std::any_of(prepared.begin(), prepared.begin() + static_cast<std::ptrdiff_t>(i),
                                        [&](const auto& e) { return e.key == prepared[i].key; });
    if (twice_here || find_patch_key(registered, prepared[i].key) != registered.end()) {
      throw Error("tracetorch: register_patch_mapping: \"" + prepared[i].key +
                  "\" is already registered (pass overwrite = true to replace it)");
    }
  }
}

/// Adds compiled entries, all or none; an overwritten key keeps its place.
inline void add_patch_entries(std::vector<PatchEntry> prepared, bool overwrite) {
  auto& registry = patch_registry();
  std::lock_guard lock(registry.mutex);
  check_new_patch_keys(prepared, registry.entries, overwrite);
  for (auto& entry : prepared) {
    const auto existing = find_patch_key(registry.entries, entry.key);
    if (existing != registry.entries.end()) {
      *existing = std::move(entry);
    } else {
      registry.entries.push_back(std::move(entry));
    }
  }
}

/// Empties the registry (clear_patch_mapping).
inline void clear_patch_entries() {
  auto& registry = patch_registry();
  std::lock_guard lock(registry.mutex);
  registry.entries.clear();
}

/// Removes keys, all or none: a key that is not registered is an error.
inline void remove_patch_keys(const std::vector<std::string>& keys) {
  auto& registry = patch_registry();
  std::lock_guard lock(registry.mutex);
  for (const auto& key : keys) {
    if (find_patch_key(registry.entries, key) == registry.entries.end()) {
      throw Error("tracetorch: unregister_patch_mapping: \"" + key + "\" is not registered");
    }
  }
  std::erase_if(registry.entries, [&](const auto& e) { return std::find(keys.begin(), keys.end(), e.key) != keys.end(); });
}

}  // namespace detail
}  // namespace tracetorch
