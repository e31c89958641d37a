#pragma once
/// \file
/// `TRACEABLE(Name)`: the one annotation a module class needs.
///
/// LibTorch has no forward hooks and `forward` is not virtual, so calls are intercepted at
/// compile time instead: `TRACEABLE(Name)` defines the holder `Name` (as `TORCH_MODULE(Name)`
/// does) over `Traced<NameImpl>`, a class derived from `NameImpl` whose `forward` has the exact
/// signature of `NameImpl::forward` and checks one pointer before calling it. Nothing is replaced
/// at run time; with no trace attached a call costs that one branch.
///
/// \code
/// struct MlpImpl : torch::nn::Module {
///   torch::Tensor forward(torch::Tensor x);
/// };
/// TRACEABLE(Mlp);   // holder `Mlp`, registered name "Mlp"
/// static_assert(tracetorch::is_traceable_v<Mlp>);
/// \endcode

#include <type_traits>

#include "tracetorch/config.hpp"
#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/traceable.hpp"  // tracetorch::is_traceable_v

/// `TRACETORCH_TRACEABLE(Name)` after `struct NameImpl : torch::nn::Module {...};` defines the
/// holder `Name` like `TORCH_MODULE(Name)` and registers "Name" (a trace shows it as the root's
/// path). `TRACEABLE(Name)` is its short name, left undefined under
/// TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES (as doctest's DOCTEST_CONFIG_NO_SHORT_MACRO_NAMES).
#define TRACETORCH_TRACEABLE(Name) TRACETORCH_TRACEABLE_IMPL(Name, Name##Impl)
#ifndef TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES
#define TRACEABLE(Name) TRACETORCH_TRACEABLE(Name)
#endif

/// `TRACETORCH_TRACEABLE` with an explicit Impl type, like `TORCH_MODULE_IMPL`.
#ifdef TRACETORCH_DISABLE
// Compiled out (doctest's DOCTEST_CONFIG_DISABLE idea): LibTorch's holder of the plain Impl, no
// tracing; the call operators are the traced holder's, so calls compile the same way.
#define TRACETORCH_TRACEABLE_IMPL(Name, ImplType)                                                 \
  class Name : public ::tracetorch::detail::PlainHolder<ImplType> { /* NOLINT */                  \
   public:                                                                                        \
    using ::tracetorch::detail::PlainHolder<ImplType>::PlainHolder;                               \
    using Impl = ImplType;                                                                        \
  }
#else
#define TRACETORCH_TRACEABLE_IMPL(Name, ImplType)                                                 \
  class Name : public ::tracetorch::detail::TracedHolder<ImplType, #Name> { /* NOLINT */          \
   public:                                                                                        \
    using ::tracetorch::detail::TracedHolder<ImplType, #Name>::TracedHolder;                      \
    using Impl = ImplType;                                                                        \
  };                                                                                              \
  ::tracetorch::detail::traceable_tag<Name> tracetorch_traceable_marker(ImplType*)
#endif  // TRACETORCH_DISABLE
