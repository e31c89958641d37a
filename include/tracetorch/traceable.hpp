#pragma once
/// \file
/// `tracetorch::is_traceable_v<T>`: whether a module type was declared with `TRACEABLE`. Small
/// and type-only, so that detail code that checks it (capture's record maps and replacements)
/// includes it rather than defining public names itself.
///
/// \code
/// static_assert(tracetorch::is_traceable_v<Note>);          // the holder
/// static_assert(tracetorch::is_traceable_v<NoteImpl>);      // its Impl
/// static_assert(!tracetorch::is_traceable_v<torch::nn::Linear>);
/// \endcode

#include <type_traits>

#include "tracetorch/detail/module/holder.hpp"  // TracedModuleBase, traceable_tag

namespace tracetorch {

/// True for a module type declared with `TRACEABLE` (its Impl, its holder or its traced form).
template <class T>
inline constexpr bool is_traceable_v =
    std::is_base_of_v<detail::TracedModuleBase, T> ||
    requires { requires std::is_base_of_v<detail::TracedModuleBase, typename T::ContainedType>; } ||
    requires(T* p) { requires detail::is_traceable_tag<decltype(tracetorch_traceable_marker(p))>::value; };

}  // namespace tracetorch
