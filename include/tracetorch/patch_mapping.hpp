#pragma once
/// \file
/// Run-time patch mapping, as transformers' monkey_patching registry: original class names
/// (exact, or regex patterns) mapped to replacement module types, which output capture records
/// instead of the originals once patch_output_recorders was called. Patterns are RE2, which
/// reads Python's `re` syntax (`(?i)`, `(?P<name>...)`, `\d`) except lookaround and
/// backreferences, and matches in linear time; links -lre2.
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

#include "tracetorch/detail/capture/capturing_models.hpp"
#include "tracetorch/detail/capture/patch_pattern.hpp"
#include "tracetorch/detail/capture/patch_registry.hpp"

namespace tracetorch {

/// The registry value for replacement module type `T` (TRACEABLE).
/// \code
/// tracetorch::PatchReplacement fused = tracetorch::replacement<FusedAttention>();
/// \endcode
template <class T>
PatchReplacement replacement() {
  return detail::replacement_for<T>();
}

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

/// The registered replacement for a class name: an exact key first, then the first pattern (in
/// registration order) that regex-searches successfully in the name.
/// \code
/// const bool patched = tracetorch::find_patch_replacement("LlamaAttention").has_value();
/// \endcode
inline std::optional<PatchReplacement> find_patch_replacement(std::string_view class_name) {
  return detail::find_patch_replacement(class_name);
}

/// transformers' `patch_output_recorders(model)`: for `model` and every sub-model in it that
/// captures outputs, each recorder whose target class name has a registered replacement (exact
/// name first, then patterns, as find_patch_replacement) records the replacement from now on,
/// instead of the original: for every instance of that model class, as upstream's class-level
/// record map. Returns what each recorder of those models now records. Without this call the
/// registry does not change what is recorded.
/// \code
/// for (const auto& recorder : tracetorch::patch_output_recorders(model)) std::cout << recorder.replacement;
/// \endcode
template <class ModelHolder>
std::vector<PatchedRecorder> patch_output_recorders(const ModelHolder& model) {
#ifdef TRACETORCH_DISABLE
  (void)model;
  return {};
#else
  return detail::patch_model_recorders(model);
#endif
}

/// Undoes patch_output_recorders for every model class (tracetorch's own: upstream has no way
/// back short of a new process; tests need one).
/// \code
/// tracetorch::unpatch_output_recorders();
/// \endcode
inline void unpatch_output_recorders() { detail::unpatch_all_model_recorders(); }

}  // namespace tracetorch
