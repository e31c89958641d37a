#pragma once
/// \file
/// A record map turned into one capture's recorder specs: which module types each recorder
/// accepts (its target, compile-time replacements, or the patched replacement) and its slot.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/detail/capture/read_recorded.hpp"
#include "tracetorch/capture/recorder.hpp"
#include "tracetorch/detail/capture/session.hpp"
#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/traceable.hpp"

namespace tracetorch::detail {

template <class Tuple>
struct type_indices;
template <class... T>
struct type_indices<std::tuple<T...>> {
  static void append(std::vector<std::type_index>& out) {
    static_assert((is_traceable_v<T> && ...), "tracetorch::replacements: every replacement type must be TRACEABLE");
    (out.emplace_back(typeid(traced_type_t<T>)), ...);
  }
};

template <class Recorder>
void resolve_targets(RecorderSpec& spec, const PatchedTargets& patched) {
  using Traced = typename Recorder::target;
  using Impl = typename Traced::ImplType;
  if (const auto found = patched.find(Traced::registered_name); found != patched.end()) {
    // Upstream swaps the target class for the replacement, still tested with isinstance.
    spec.is_target = found->second.is_instance;
    if (spec.is_target == nullptr) spec.types.push_back(found->second.type);
    return;
  }
  spec.is_target = &is_instance_of<Impl>;
  type_indices<typename replacements<typename Recorder::original>::types>::append(spec.types);
  if constexpr (!std::is_same_v<Impl, typename Recorder::original>) {
    type_indices<typename replacements<Impl>::types>::append(spec.types);
  }
}

template <class Record, class Recorder>
void add_recorder_spec(std::vector<RecorderSpec>& specs, std::size_t slot, const PatchedTargets& patched) {
  RecorderSpec spec{.slot = slot,
                    .role = Record::role,
                    .index = Record::template index_of<Recorder>(),
                    .layer_name = Recorder::layer_name,
                    .index_from_keywords = keyword_index_function<Recorder>(),
                    .read = recorded_reader<Recorder>()};
  resolve_targets<Recorder>(spec, patched);
  specs.push_back(std::move(spec));
}

/// A record that lists several recorders is never patched: upstream's patch_output_recorders
/// swaps a bare class or an OutputRecorder's target, and leaves a list as it is.
template <class Record, class... Recorders>
void add_record_specs(std::vector<RecorderSpec>& specs, std::size_t slot, const PatchedTargets& patched,
                      std::tuple<Recorders...>*) {
  const PatchedTargets none;
  const PatchedTargets& used = sizeof...(Recorders) > 1 ? none : patched;
  (add_recorder_spec<Record, Recorders>(specs, slot, used), ...);
}

template <class Record>
void prepare_slot(const ResolvedOutputs& wanted, const PatchedTargets& patched, std::vector<RecorderSpec>& specs,
                  std::vector<CaptureSlot>& slots, std::size_t slot) {
  const bool requested = wanted.wants(Record::field);
  slots[slot].requested = requested;
  if (requested) add_record_specs<Record>(specs, slot, patched, static_cast<typename Record::recorders*>(nullptr));
}

template <class Records, std::size_t... Slot>
void prepare_slots(const ResolvedOutputs& wanted, const PatchedTargets& patched, std::vector<RecorderSpec>& specs,
                   std::vector<CaptureSlot>& slots, std::index_sequence<Slot...>) {
  (prepare_slot<std::tuple_element_t<Slot, Records>>(wanted, patched, specs, slots, Slot), ...);
}

}  // namespace tracetorch::detail
