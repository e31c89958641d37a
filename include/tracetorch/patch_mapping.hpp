#pragma once
/// \file
/// Run-time patch mapping, as transformers' monkey_patching registry: original class names
/// (exact, or regex patterns) mapped to replacement module types, which output capture records
/// instead of the originals once patch_output_recorders was called. Patterns are RE2, which
/// reads Python's `re` syntax (`(?i)`, `(?P<name>...)`, `\d`) except lookaround and
/// backreferences, and matches in linear time; links -lre2.
///
/// The registry also builds: a submodule declared `tracetorch::Replaceable<Experts>` and built
/// with `register_replaceable<Experts>(*this, "experts", config)` is the replacement registered
/// for "Experts" (`replacement<FusedExperts, Config>()`: built from the same arguments, called
/// with the same forward), else Experts itself. `clear_patch_mapping()` empties the registry.
///
/// `replacement<T, Args...>()`, `find_patch_replacement`, `clear_patch_mapping`, `Replaceable`,
/// `make_replaceable`, `register_replaceable`, `patch_output_recorders` and
/// `unpatch_output_recorders` are defined in capture/patch_api.hpp, which capture.hpp
/// includes too: model code gets them without RE2's header. Registering needs this header.
///
/// \code
/// tracetorch::register_patch_mapping({{"LlamaAttention", tracetorch::replacement<FusedAttention>()}});
/// tracetorch::patch_output_recorders(model);  // model's recorders of LlamaAttention now record FusedAttention
/// \endcode

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/capture/patch_api.hpp"  // replacement, find_patch_replacement, patch_output_recorders
#include "tracetorch/detail/capture/patch_pattern.hpp"
#include "tracetorch/capture/patch_registry.hpp"

namespace tracetorch {

/// Maps original class names (exact names or patterns, tried as Python's `re.search`) to
/// replacement types. All-or-nothing: a key already registered (unless `overwrite`) or an
/// invalid pattern is a tracetorch::Error and nothing is registered (upstream warns and treats
/// an invalid pattern as a plain name: refusing it at once is tracetorch's choice).
/// \code
/// tracetorch::register_patch_mapping({{"(?i)^llama.*attention$", tracetorch::replacement<FusedAttention>()}});
/// \endcode
inline void register_patch_mapping(const std::vector<std::pair<std::string, PatchReplacement>>& mapping,
                                   bool overwrite = false) {
  detail::add_patch_entries(detail::compile_patch_entries(mapping), overwrite);
}

/// Removes registered keys; a key that is not registered is a tracetorch::Error (and nothing
/// is removed).
/// \code
/// tracetorch::unregister_patch_mapping({"LlamaAttention"});
/// \endcode
inline void unregister_patch_mapping(const std::vector<std::string>& keys) { detail::remove_patch_keys(keys); }

}  // namespace tracetorch
