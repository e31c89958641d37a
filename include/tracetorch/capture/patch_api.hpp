#pragma once
/// \file
/// The patch API that needs no RE2 (replacement, find_patch_replacement, clear_patch_mapping,
/// Replaceable, make_replaceable, register_replaceable, patch_output_recorders,
/// unpatch_output_recorders), documented in tracetorch/patch_mapping.hpp; capture.hpp includes it
/// too, so that model code gets it without RE2's header.

#include <optional>
#include <string_view>
#include <vector>

#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/capture/patch_registry.hpp"
#include "tracetorch/capture/replaceable.hpp"  // Replaceable, make_replaceable, register_replaceable

namespace tracetorch {

/// The registry value for replacement module type `T` (TRACEABLE). With `Args`, the types the
/// original is constructed from: make_replaceable then builds `T` from the same arguments wherever
/// the original is declared Replaceable (a T that cannot be built from them does not compile).
/// Without, `T` is recorded by patch_output_recorders but built only where the original takes no
/// arguments.
/// \code
/// tracetorch::PatchReplacement fused = tracetorch::replacement<FusedAttention, AttentionConfig>();
/// \endcode
template <class T, class... Args>
PatchReplacement replacement() {
  return detail::replacement_for<T, Args...>();
}

/// Empties the registry (transformers' clear_patch_mapping): models built afterwards have their
/// original classes. Recorders patched earlier stay patched until unpatch_output_recorders.
/// \code
/// tracetorch::clear_patch_mapping();
/// \endcode
inline void clear_patch_mapping() { detail::clear_patch_entries(); }

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
