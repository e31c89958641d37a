#pragma once
/// \file
/// Record maps, transformers' `_can_record_outputs`: which submodules fill which output field,
/// declared at compile time with `record<...>()` entries and `OutputRecorder`s.
///
/// \code
/// struct LlamaModelImpl : torch::nn::Module {
///   static constexpr auto can_record_outputs = tracetorch::output_records(
///       tracetorch::record<"hidden_states", LlamaDecoderLayer>(),
///       tracetorch::record<"attentions", tracetorch::OutputRecorder<LlamaAttention, 1>>());
/// };
/// \endcode

#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/capture/recorder.hpp"
#include "tracetorch/traceable.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch {

/// One entry of a record map: an output field and the recorders that fill it.
template <class FieldKey, class... Recorders>
struct OutputRecord {
  static constexpr std::string_view field = FieldKey::name;
  static_assert(detail::is_record_key(field),
                "tracetorch::record: a record key is the output field's name (letters, digits, _), written "
                "without output_ (router_logits, asked for by output_router_logits)");
  static constexpr detail::OutputRole role = detail::role_of(field);
  using recorders = std::tuple<Recorders...>;

  /// Two recorders under attentions are self- and cross-attention in one list, split by
  /// position into attentions and cross_attentions (upstream's rule).
  static constexpr bool splits_cross_attentions = field == "attentions" && sizeof...(Recorders) == 2;

  /// The element a recorder reads (0 for an index function, which says it per call).
  template <class Recorder>
  static constexpr int index_of() {
#ifdef TRACETORCH_DISABLE
    return 0;
#else
    if constexpr (!is_traceable_v<typename Recorder::original>) {
      return 0;  // OutputRecorder's static_assert said it; nothing more to add
    } else if constexpr (detail::is_index_function<Recorder::index>) {
      return detail::checked_recorder_index<typename Recorder::target, Recorder::index>();
    } else {
      constexpr int written = Recorder::index == detail::field_default_index ? detail::default_index_of(field)
                                                                              : static_cast<int>(Recorder::index);
      return detail::checked_recorder_index<typename Recorder::target, written>();
    }
#endif
  }
  static constexpr bool indices_checked = ((static_cast<void>(index_of<Recorders>()), true) && ...);
};

/// A record-map entry naming its field: `record<"attentions", OutputRecorder<LlamaAttention, 1>>()`.
/// A recorder may be given as a bare module type (`record<"hidden_states", LlamaDecoderLayer>()`).
/// Any field of the output struct may be a key: `record<"router_logits", OutputRecorder<Router, 0>>()`
/// is asked for by `output_router_logits`, from the call (`.output = {{"router_logits", true}}`)
/// or the config, as upstream; a key the output struct lacks does not compile.
/// \code
/// tracetorch::record<"cross_attentions", tracetorch::OutputRecorder<BertSelfAttention, 1, ".crossattention.">>()
/// \endcode
template <detail::FixedString Field, class... Recorders>
constexpr auto record() {
  static_assert(sizeof...(Recorders) > 0, "tracetorch::record: name at least one recorder");
  using Entry = OutputRecord<detail::field_named<Field>, typename detail::as_recorder<Recorders>::type...>;
  static_assert(Entry::indices_checked);
  return Entry{};
}

/// A record-map entry by member pointer: `record<&Output::attentions, LlamaAttention>()`.
/// \code
/// tracetorch::record<&BaseModelOutputWithPast::hidden_states, LlamaDecoderLayer>()
/// \endcode
template <auto Member, class... Recorders>
  requires std::is_member_object_pointer_v<decltype(Member)>
constexpr auto record() {
  static_assert(sizeof...(Recorders) > 0, "tracetorch::record: name at least one recorder");
  using Entry = OutputRecord<detail::field_at<Member>, typename detail::as_recorder<Recorders>::type...>;
  static_assert(Entry::indices_checked);
  return Entry{};
}

/// The record map, transformers' `_can_record_outputs`:
/// `static constexpr auto can_record_outputs = tracetorch::output_records(record<...>(), ...);`
/// \code
/// static constexpr auto can_record_outputs =
///     tracetorch::output_records(tracetorch::record<"hidden_states", LlamaDecoderLayer>());
/// \endcode
template <class... Records>
constexpr std::tuple<Records...> output_records(Records...) {
  return {};
}

}  // namespace tracetorch
