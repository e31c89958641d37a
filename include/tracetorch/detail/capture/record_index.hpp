#pragma once
/// \file
/// Which element of a recorded module's output a recorder reads, and which output role a field
/// plays: upstream's defaults and Python's negative indices, checked at compile time.

#include <torch/torch.h>

#include <cstddef>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/module/serialize.hpp"
#include "tracetorch/detail/module/holder.hpp"

namespace tracetorch::detail {

enum class OutputRole { hidden_states, attentions };

constexpr bool is_known_field(std::string_view field) {
  return field == "hidden_states" || field == "attentions" || field == "cross_attentions";
}

/// The index a bare type in a record map gets: upstream's 0 for a hidden_states key, else 1.
/// (An OutputRecorder written out defaults to 0, as upstream's dataclass does.)
inline constexpr int field_default_index = std::numeric_limits<int>::min();
constexpr int default_index_of(std::string_view field) {
  // By hand: GCC's UBSan build does not take string_view::find as a constant expression here.
  constexpr std::string_view key = "hidden_states";
  for (std::size_t at = 0; at + key.size() <= field.size(); ++at) {
    if (field.substr(at, key.size()) == key) return 0;
  }
  return 1;
}
/// cross_attentions follow output_attentions, as in transformers.
constexpr OutputRole role_of(std::string_view field) {
  return field == "hidden_states" ? OutputRole::hidden_states : OutputRole::attentions;
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
    static_assert(std::is_same_v<Element, torch::Tensor> || std::is_same_v<Element, std::optional<torch::Tensor>>,
                  "tracetorch::OutputRecorder: index names an element of the target's forward output that is "
                  "neither a torch::Tensor nor a std::optional<torch::Tensor>");
  }
  return index;
}

/// The element index a recorder reads, Python's negative indices counted from the end; checked,
/// readably, against `Traced`'s forward output. A forward returning one tensor is recorded whole,
/// whatever the index (upstream records a non-tuple output as it is).
template <class Traced, int Index>
constexpr int checked_output_index() {
  using Pointer = typename forward_pointer<typename Traced::ImplType>::type;
  if constexpr (std::is_void_v<Pointer>) {  // an overloaded or template forward: checked at run time
    static_assert(Index >= 0,
                  "tracetorch::OutputRecorder: a negative index needs a target with one, non-template forward");
    return Index;
  } else {
    using R = std::remove_cvref_t<typename member_function_result<Pointer>::type>;
    if constexpr (std::is_same_v<R, torch::Tensor>) {
      return 0;
    } else if constexpr (is_tuple_like<R>) {
      return checked_tuple_index<R, Index>();
    } else {
      static_assert(always_false<R>,
                    "tracetorch::OutputRecorder: the target's forward returns neither a tensor nor a tuple");
      return 0;
    }
  }
}

}  // namespace tracetorch::detail
