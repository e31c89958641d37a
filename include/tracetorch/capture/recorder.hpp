#pragma once
/// \file
/// The recorder types a record map is written with (OutputRecorder, compile-time replacements)
/// and the keys naming a record's field: what tracetorch/record_map.hpp builds its entries from.

#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/traceable.hpp"

namespace tracetorch {

/// Compile-time replacements of a module type (type-level patch mapping): a recorder that
/// targets `Original` also records the listed types. Specialise for the holder type:
/// `template <> struct tracetorch::replacements<LlamaAttention> { using types = std::tuple<FusedAttention>; };`
template <class Original>
struct replacements {
  using types = std::tuple<>;
};

/// transformers' `OutputRecorder(target_class, index=..., layer_name=...)`: records element
/// `Index` of the output of every module that is a `Target` (holder or Impl type of a TRACEABLE
/// class, or a class derived from it: Python's isinstance), as upstream: the index defaults to 0,
/// counts from the end when negative, and a module returning one tensor is recorded whole;
/// `LayerName` is matched as a substring of the module's path written with a leading dot
/// (`".crossattention."` matches `.encoder.layer.0.crossattention.self`).
///
/// `Index` may instead be a function giving the index per call (tracetorch's own: a C++ forward
/// returns one type, so where Python's tuple changes length, the port returns a list of tensors):
/// a function of the call's keywords, `int (const tracetorch::CallKeywords&)`, or of the target's
/// forward output, `int (const Output&)`; a captureless lambda or a function's name.
template <class Target, auto Index = 0, detail::FixedString LayerName = "">
struct OutputRecorder {
#ifndef TRACETORCH_DISABLE
  static_assert(is_traceable_v<Target>,
                "tracetorch::OutputRecorder: the target module type was never declared TRACEABLE");
#endif
  using target = typename std::conditional_t<is_traceable_v<Target>, detail::traced_type<Target>,
                                             std::type_identity<void>>::type;
  using original = Target;
  static constexpr auto index = Index;
  static constexpr std::string_view layer_name = LayerName.view();
};

namespace detail {

/// A recorder as a record map lists it: a bare module type becomes an OutputRecorder whose
/// index is the field's default.
template <class R>
struct as_recorder {
  using type = OutputRecorder<R, field_default_index>;
};
template <class T, auto I, FixedString L>
struct as_recorder<OutputRecorder<T, I, L>> {
  using type = OutputRecorder<T, I, L>;
};

/// A record's field, named by a string (`record<"attentions", ...>`).
template <FixedString Name>
struct field_named {
  static constexpr std::string_view name = Name.view();
};
/// A record's field, named by a member pointer (`record<&Output::attentions, ...>`).
template <auto Member>
struct field_at {
  static constexpr std::string_view name = member_name<Member>::value;
};

}  // namespace detail
}  // namespace tracetorch
