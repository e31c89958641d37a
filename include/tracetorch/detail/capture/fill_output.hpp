#pragma once
/// \file
/// Collected values moved into the output struct's fields, as upstream finishes them: the last
/// hidden state tied to the output's, attentions split from cross_attentions.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/detail/capture/session.hpp"

namespace tracetorch::detail {

/// How many of `Out`'s fields are named `key`.
template <class... Fields>
constexpr std::size_t fields_named(std::string_view key, std::tuple<Fields...>*) {
  return ((Fields::name == key ? 1 : 0) + ... + 0);
}

/// The field a record key fills must exist in the output struct: checked once, before anything
/// else, so that a misspelled key is one error (the note names the record).
template <class Out, class Record>
constexpr bool record_field_declared() {
  using Fields = output_fields_t<Out>;
  static_assert(fields_named(Record::field, static_cast<Fields*>(nullptr)) == 1,
                "tracetorch::capture_outputs: the record map names a key that is not a field of the output struct "
                "(TRACETORCH_OUTPUT); record keys are field names, such as router_logits");
  static_assert(!Record::splits_cross_attentions || fields_named("cross_attentions", static_cast<Fields*>(nullptr)) == 1,
                "tracetorch::capture_outputs: two recorders under attentions fill attentions and cross_attentions: "
                "the output struct needs a cross_attentions field");
  return true;
}

template <class Out, class... Records>
constexpr bool record_fields_declared(std::tuple<Records...>*) {
  return (record_field_declared<Out, Records>() && ...);
}

template <class Record, class Field, class Out, class Value>
void store_if_named(Out& out, Value& value) {
  if constexpr (Field::name == Record::field) {
    using Type = std::remove_cvref_t<decltype(out.*Field::member)>;
    static_assert(std::is_same_v<Type, std::optional<std::vector<torch::Tensor>>>,
                  "tracetorch::capture_outputs: a recorded field must be std::optional<std::vector<torch::Tensor>>");
    if constexpr (std::is_same_v<Type, std::optional<std::vector<torch::Tensor>>>) out.*Field::member = std::move(value);
  }
}

/// Moves `values` into the field named `Record::field` (found through TRACETORCH_OUTPUT; that it
/// exists was checked by record_fields_declared).
template <class Record, class Out, class Value, class... Fields>
void store_field(Out& out, Value&& value, std::tuple<Fields...>*) {
  (store_if_named<Record, Fields>(out, value), ...);
}

/// The value upstream ties the last hidden state to: vision_hidden_states where the output has
/// that field, else last_hidden_state; none (no tie) when it has neither.
template <class Out>
std::optional<torch::Tensor> tied_hidden_state(const Out& out) {
  if constexpr (requires { out.vision_hidden_states; }) {
    return tensor_of(out.vision_hidden_states);
  } else if constexpr (requires { out.last_hidden_state; }) {
    return tensor_of(out.last_hidden_state);
  } else {
    return std::nullopt;
  }
}

template <FixedString Name>
struct record_named {
  static constexpr std::string_view field = Name.view();
};

/// Field `Name` of `Out`, which must be a list of tensors.
template <FixedString Name, class Out>
void store_named(Out& out, std::vector<torch::Tensor> values) {
  store_field<record_named<Name>>(out, std::move(values), static_cast<output_fields_t<Out>*>(nullptr));
}

/// Upstream drops the last recorded state and appends the tied one: with no layers at all, the
/// tuple is (last_hidden_state,).
template <class Out>
void tie_last_hidden_state(const Out& out, CaptureSlot& slot, const ResolvedOutputs& wanted,
                           const CaptureSettings& settings) {
  if (const auto tied = tied_hidden_state(out); tied && settings.tie_last_hidden_states) {
    if (!slot.values.empty()) slot.values.pop_back();
    const auto position = static_cast<std::int64_t>(slot.values.size());
    slot.values.push_back(wanted.hidden_states.includes(position) ? *tied : torch::Tensor());
  }
}

template <class Record, class Out>
void finish_slot(Out& out, CaptureSlot& slot, const ResolvedOutputs& wanted, const CaptureSettings& settings) {
  if (!slot.requested) return;
  if constexpr (Record::role == OutputRole::hidden_states) tie_last_hidden_state(out, slot, wanted, settings);
  if constexpr (Record::splits_cross_attentions) {
    std::vector<torch::Tensor> self, cross;
    for (std::size_t i = 0; i < slot.values.size(); ++i) (i % 2 == 0 ? self : cross).push_back(std::move(slot.values[i]));
    store_named<"attentions">(out, std::move(self));
    store_named<"cross_attentions">(out, std::move(cross));
  } else {
    store_field<Record>(out, std::move(slot.values), static_cast<output_fields_t<Out>*>(nullptr));
  }
}

template <class Records, class Out, std::size_t... Slot>
void finish_slots(Out& out, std::vector<CaptureSlot>& slots, const ResolvedOutputs& wanted,
                  const CaptureSettings& settings, std::index_sequence<Slot...>) {
  (finish_slot<std::tuple_element_t<Slot, Records>>(out, slots[Slot], wanted, settings), ...);
}

}  // namespace tracetorch::detail
