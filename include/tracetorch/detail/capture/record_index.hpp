#pragma once
/// \file
/// Which element of a recorded module's output a recorder reads, and which output role a field
/// plays: upstream's defaults and Python's negative indices, checked at compile time.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <iterator>  // std::ranges::range, begin and size (<ranges> costs more to parse)
#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/capture/call_keywords.hpp"
#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/module/serialize.hpp"
#include "tracetorch/detail/module/holder.hpp"

namespace tracetorch::detail {

/// How a record key is asked for: hidden_states and attentions by their own flags (cross_attentions
/// and SAM's mask_decoder_attentions follow output_attentions, as upstream), every other key by
/// its own `output_<key>` flag.
enum class OutputRole { hidden_states, attentions, keyed };

/// A record key is an output field's name, written without `output_` (that prefix makes the flag).
constexpr bool is_record_key(std::string_view key) {
  if (key.empty() || (key[0] >= '0' && key[0] <= '9') || key.substr(0, 7) == "output_") return false;
  for (const char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

/// The index a bare type in a record map gets: upstream's 0 for a key containing hidden_states,
/// else 1. (An OutputRecorder written out defaults to 0, as upstream's dataclass does.)
inline constexpr int field_default_index = std::numeric_limits<int>::min();
constexpr int default_index_of(std::string_view field) {
  // By hand: GCC's UBSan build does not take string_view::find as a constant expression here.
  constexpr std::string_view key = "hidden_states";
  for (std::size_t at = 0; at + key.size() <= field.size(); ++at) {
    if (field.substr(at, key.size()) == key) return 0;
  }
  return 1;
}
constexpr OutputRole role_of(std::string_view field) {
  if (field == "hidden_states") return OutputRole::hidden_states;
  if (field == "attentions" || field == "cross_attentions" || field == "mask_decoder_attentions") {
    return OutputRole::attentions;
  }
  return OutputRole::keyed;
}

template <class Signature>
struct member_function_result;
#define TRACETORCH_DETAIL_RESULT_OF(QUALIFIERS)              \
  template <class R, class C, class... A>                    \
  struct member_function_result<R (C::*)(A...) QUALIFIERS> { \
    using type = R;                                          \
  }
TRACETORCH_DETAIL_RESULT_OF();
TRACETORCH_DETAIL_RESULT_OF(const);
TRACETORCH_DETAIL_RESULT_OF(noexcept);
TRACETORCH_DETAIL_RESULT_OF(const noexcept);
#undef TRACETORCH_DETAIL_RESULT_OF

/// The exact return type of `Traced`'s forward, or void when it is overloaded or a template.
template <class Traced>
struct forward_result {
  using type = void;
};
template <class Traced>
  requires(!std::is_void_v<typename forward_pointer<typename Traced::ImplType>::type>)
struct forward_result<Traced> {
  using type = typename member_function_result<typename forward_pointer<typename Traced::ImplType>::type>::type;
};
template <class Traced>
using forward_result_t = typename forward_result<Traced>::type;

template <class T>
concept tensor_like = std::is_same_v<T, torch::Tensor> || std::is_same_v<T, std::optional<torch::Tensor>>;

/// A result whose length is known only at run time: a list of tensors (Python's tuple of varying
/// length, such as GPT-2's `(hidden, present, weights)` or `(hidden, weights)`).
template <class R>
concept tensor_range = std::ranges::sized_range<R> && tensor_like<std::remove_cvref_t<std::ranges::range_value_t<R>>>;

/// Element `Index` of a forward output tuple `R`, counted from the end when negative; it must be
/// a tensor or an optional tensor.
template <class R, int Index>
constexpr int checked_tuple_index() {
  constexpr int size = static_cast<int>(std::tuple_size_v<R>);
  constexpr int index = Index < 0 ? Index + size : Index;
  static_assert(index >= 0 && index < size,
                "tracetorch::OutputRecorder: index out of range for the target's forward output tuple");
  if constexpr (index >= 0 && index < size) {
    using Element = std::remove_cvref_t<std::tuple_element_t<index, R>>;
    static_assert(tensor_like<Element>,
                  "tracetorch::OutputRecorder: index names an element of the target's forward output that is "
                  "neither a torch::Tensor nor a std::optional<torch::Tensor>");
  }
  return index;
}

/// The element index a recorder reads, Python's negative indices counted from the end; checked,
/// readably, against `Traced`'s forward output. A forward returning one tensor is recorded whole,
/// whatever the index (upstream records a non-tuple output as it is); a list of tensors is
/// indexed at run time.
template <class Traced, int Index>
constexpr int checked_output_index() {
  using Result = forward_result_t<Traced>;
  if constexpr (std::is_void_v<Result>) {  // an overloaded or template forward: checked at run time
    static_assert(Index >= 0,
                  "tracetorch::OutputRecorder: a negative index needs a target with one, non-template forward");
    return Index;
  } else {
    using R = std::remove_cvref_t<Result>;
    if constexpr (tensor_like<R>) {
      return 0;
    } else if constexpr (is_tuple_like<R>) {
      return checked_tuple_index<R, Index>();
    } else if constexpr (tensor_range<R>) {
      return Index;
    } else {
      static_assert(always_false<R>,
                    "tracetorch::OutputRecorder: the target's forward returns neither a tensor, a tuple nor a "
                    "list of tensors");
      return 0;
    }
  }
}

/// An index given as a function (pointer or captureless lambda) rather than a number.
template <auto Index>
inline constexpr bool is_index_function = !std::is_integral_v<decltype(Index)>;

/// An index function of the call's keywords: `int (const tracetorch::CallKeywords&)`.
template <auto Index>
inline constexpr bool indexes_by_keywords =
    is_index_function<Index> && std::is_invocable_r_v<std::int64_t, decltype(Index), const CallKeywords&>;

/// An index function of `Traced`'s forward output: `int (const Output&)`.
template <class Traced, auto Index>
constexpr bool indexes_by_output() {
  if constexpr (!is_index_function<Index> || indexes_by_keywords<Index>) {
    return false;
  } else if constexpr (std::is_void_v<forward_result_t<Traced>>) {
    return false;
  } else {
    return std::is_invocable_r_v<std::int64_t, decltype(Index), const std::remove_cvref_t<forward_result_t<Traced>>&>;
  }
}

/// The index a recorder reads when it is a number (checked); 0 for an index function, which is
/// checked to take the call's keywords or the target's forward output.
template <class Traced, auto Index>
constexpr int checked_recorder_index() {
  if constexpr (!is_index_function<Index>) {
    return checked_output_index<Traced, static_cast<int>(Index)>();
  } else {
    static_assert(indexes_by_keywords<Index> || indexes_by_output<Traced, Index>(),
                  "tracetorch::OutputRecorder: an index function takes `const tracetorch::CallKeywords&` or the "
                  "target's forward output (of a target with one, non-template forward) and returns the index");
    return 0;
  }
}

}  // namespace tracetorch::detail
