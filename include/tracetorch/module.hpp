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
/// \endcode

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/detail/call.hpp"
#include "tracetorch/detail/debugger/debug_io.hpp"

namespace tracetorch::detail {

/// A string literal usable as a template argument: the registered name of a traced type.
template <std::size_t N>
struct FixedString {
  char chars[N]{};
  constexpr FixedString(const char (&text)[N]) { std::copy_n(text, N, chars); }  // NOLINT: implicit by design
  constexpr std::string_view view() const noexcept { return {chars, N - 1}; }
};

/// `&Impl::forward` when it names one non-template function, else void (overloaded or template).
template <class Impl>
struct forward_pointer {
  using type = void;
};
template <class Impl>
  requires requires { &Impl::forward; }
struct forward_pointer<Impl> {
  using type = decltype(&Impl::forward);
};

/// `Cloneable<Impl>::clone` makes a plain `Impl`: the deep copy of a traced module is wrapped
/// again, so that it stays traced and fits its holder. Submodules need nothing: a clone re-creates
/// them through `reset()` and assigns their state. An `Impl` that is not `Cloneable` keeps
/// LibTorch's "clone() has not been implemented" error.
template <class TracedType>
std::shared_ptr<torch::nn::Module> clone_traced(const TracedType& self, const c10::optional<torch::Device>& device) {
  using Impl = typename TracedType::ImplType;
  std::shared_ptr<torch::nn::Module> copy = self.Impl::clone(device);
  if constexpr (std::is_base_of_v<torch::nn::Cloneable<Impl>, Impl>) {
    return std::make_shared<TracedType>(dynamic_cast<const Impl&>(*copy));  // Module is a virtual base
  } else {
    return copy;  // not reached: Module::clone throws
  }
}

// The body of every traced entry point: one acquire load and one branch when nothing is
// attached; otherwise the observers see the call (detail/call.hpp).
#ifndef TRACETORCH_DISABLE
#define TRACETORCH_DETAIL_FORWARD_BODY(Types, values)                                            \
  if constexpr (::tracetorch::detail::any_debug_io_keywords<Types...>) {                          \
    if (auto request = ::tracetorch::detail::debug_io_request(values...);                         \
        request && !::tracetorch::detail::debug_io_running()) [[unlikely]] {                      \
      return ::tracetorch::detail::run_with_debug_io<R>(*this, this->traced_name(), *request, [&]() -> R { \
        return ::tracetorch::detail::traced_call<R>(                                              \
            *this, [&]() -> R { return Impl::forward(std::forward<Types>(values)...); }, values...); \
      });                                                                                         \
    }                                                                                             \
  }                                                                                               \
  if (this->attachments_.load(std::memory_order_acquire) == nullptr) [[likely]]                 \
    return Impl::forward(std::forward<Types>(values)...);                                        \
  return ::tracetorch::detail::traced_call<R>(                                                   \
      *this, [&]() -> R { return Impl::forward(std::forward<Types>(values)...); }, values...)
#else
#define TRACETORCH_DETAIL_FORWARD_BODY(Types, values) return Impl::forward(std::forward<Types>(values)...)
#endif

/// The traced form of `Impl`, for an `Impl::forward` that is overloaded or a template: `forward`
/// is a template too (so such a module cannot go into a `Sequential`, exactly as in LibTorch).
template <class Impl, FixedString Name, class ForwardPointer = typename forward_pointer<Impl>::type>
class Traced : public Impl, public TracedModuleBase {
 public:
  using Impl::Impl;
  Traced() = default;
  // Module is a virtual base of Cloneable<Impl>: the most derived class copies it, not Impl.
  explicit Traced(const Impl& copy) : torch::nn::Module(copy), Impl(copy) {}

  template <class... A>
  decltype(auto) forward(A&&... args) {
    using R = decltype(Impl::forward(std::forward<A>(args)...));
    TRACETORCH_DETAIL_FORWARD_BODY(A, args);
  }
  template <class... A>
  decltype(auto) call(A&&... args) {
    return forward(std::forward<A>(args)...);
  }
  std::string_view traced_name() const noexcept override { return Name.view(); }
  std::shared_ptr<torch::nn::Module> clone(const c10::optional<torch::Device>& device = c10::nullopt) const override {
    return clone_traced(*this, device);
  }
  static constexpr std::string_view registered_name = Name.view();
  using ImplType = Impl;
};

// One partial specialisation per qualification of a unique `forward`: the traced `forward` has
// exactly its signature, so `AnyModule` (and with it `Sequential`) deduces the same types.
// `call` serves the holder's operator(): default arguments of Impl::forward still apply.
#define TRACETORCH_DETAIL_TRACED(QUALIFIERS)                                                      \
  template <class Impl, FixedString Name, class C, class R, class... A>                           \
  class Traced<Impl, Name, R (C::*)(A...) QUALIFIERS> : public Impl, public TracedModuleBase {    \
   public:                                                                                        \
    using Impl::Impl;                                                                             \
    Traced() = default;                                                                           \
    explicit Traced(const Impl& copy) : torch::nn::Module(copy), Impl(copy) {}                    \
                                                                                                  \
    R forward(A... args) QUALIFIERS { TRACETORCH_DETAIL_FORWARD_BODY(A, args); }                  \
    template <class... Given>                                                                     \
    R call(Given&&... given) QUALIFIERS {                                                         \
      TRACETORCH_DETAIL_FORWARD_BODY(Given, given);                                               \
    }                                                                                             \
    std::string_view traced_name() const noexcept override { return Name.view(); }               \
    std::shared_ptr<torch::nn::Module> clone(                                                     \
        const c10::optional<torch::Device>& device = c10::nullopt) const override {               \
      return clone_traced(*this, device);                                                         \
    }                                                                                             \
    static constexpr std::string_view registered_name = Name.view();                             \
    using ImplType = Impl;                                                                        \
  }

TRACETORCH_DETAIL_TRACED();
TRACETORCH_DETAIL_TRACED(const);
TRACETORCH_DETAIL_TRACED(noexcept);
TRACETORCH_DETAIL_TRACED(const noexcept);
#undef TRACETORCH_DETAIL_TRACED
#undef TRACETORCH_DETAIL_FORWARD_BODY

template <class... T>
struct TypeList {};

/// One call operator per number of arguments `Impl::forward` accepts, each with the exact
/// parameter types, so that braced keyword packs work (`layer(h, {.attention_mask = m})`: a
/// template cannot deduce a braced list) and default arguments of `forward` still apply.
template <class Holder, class Impl, class R, class Given, class Rest>
class HolderCalls;
template <class Holder, class Impl, class R, class... Given>
class HolderCalls<Holder, Impl, R, TypeList<Given...>, TypeList<>> {
 public:
  R operator()(Given... args) { return static_cast<Holder&>(*this).invoke(std::forward<Given>(args)...); }
};
template <class Holder, class Impl, class R, class... Given, class Next, class... Rest>
class HolderCalls<Holder, Impl, R, TypeList<Given...>, TypeList<Next, Rest...>>
    : public HolderCalls<Holder, Impl, R, TypeList<Given..., Next>, TypeList<Rest...>> {
 public:
  using HolderCalls<Holder, Impl, R, TypeList<Given..., Next>, TypeList<Rest...>>::operator();
  // Fewer arguments than forward's parameters: only where forward's defaults allow it.
  R operator()(Given... args)
    requires requires(Impl& impl, Given&&... given) { impl.forward(std::forward<Given>(given)...); }
  {
    return static_cast<Holder&>(*this).invoke(std::forward<Given>(args)...);
  }
};

/// The call operators of a holder whose `Impl::forward` is overloaded or a template: one
/// forwarding template, as LibTorch's holder has.
template <class Holder, class Impl, class ForwardPointer>
class HolderCallOperators {
 public:
  template <class... A>
  decltype(auto) operator()(A&&... args) {
    return static_cast<Holder&>(*this).invoke(std::forward<A>(args)...);
  }
};
#define TRACETORCH_DETAIL_HOLDER_CALLS(QUALIFIERS)                                                   \
  template <class Holder, class Impl, class C, class R, class... A>                                  \
  class HolderCallOperators<Holder, Impl, R (C::*)(A...) QUALIFIERS>                                 \
      : public HolderCalls<Holder, Impl, R, TypeList<>, TypeList<A...>> {}
TRACETORCH_DETAIL_HOLDER_CALLS();
TRACETORCH_DETAIL_HOLDER_CALLS(const);
TRACETORCH_DETAIL_HOLDER_CALLS(noexcept);
TRACETORCH_DETAIL_HOLDER_CALLS(const noexcept);
#undef TRACETORCH_DETAIL_HOLDER_CALLS

/// The holder of a traced module: `torch::nn::ModuleHolder` whose call operators go through the
/// traced `call` (the traced forward, with forward's default arguments).
template <class Impl, FixedString Name>
class TracedHolder : public torch::nn::ModuleHolder<Traced<Impl, Name>>,
                     public HolderCallOperators<TracedHolder<Impl, Name>, Impl, typename forward_pointer<Impl>::type> {
  using Base = torch::nn::ModuleHolder<Traced<Impl, Name>>;

 public:
  using Base::Base;
  using Impl_ = Impl;
  using HolderCallOperators<TracedHolder<Impl, Name>, Impl, typename forward_pointer<Impl>::type>::operator();

  template <class... A>
  decltype(auto) invoke(A&&... args) {
    return this->get()->call(std::forward<A>(args)...);
  }
};

/// The holder under TRACETORCH_DISABLE: LibTorch's holder of the plain Impl with the same call
/// operators, so that keyword calls (`layer(h, {.attention_mask = m})`) compile either way.
template <class Impl>
class PlainHolder : public torch::nn::ModuleHolder<Impl>,
                    public HolderCallOperators<PlainHolder<Impl>, Impl, typename forward_pointer<Impl>::type> {
 public:
  using torch::nn::ModuleHolder<Impl>::ModuleHolder;
  using HolderCallOperators<PlainHolder<Impl>, Impl, typename forward_pointer<Impl>::type>::operator();

  template <class... A>
  decltype(auto) invoke(A&&... args) {
    return this->get()->forward(std::forward<A>(args)...);
  }
};

/// Registration marker found by argument-dependent lookup: `TRACEABLE` declares a function
/// returning it beside the user's Impl class, so compile-time code can go from an Impl type to
/// its holder (and tell traced types from plain ones).
template <class Holder>
struct traceable_tag {
  using holder = Holder;
};

template <class T>
struct is_traceable_tag : std::false_type {};
template <class H>
struct is_traceable_tag<traceable_tag<H>> : std::true_type {};

}  // namespace tracetorch::detail

namespace tracetorch {

/// True for a module type declared with `TRACEABLE` (its Impl, its holder or its traced form).
template <class T>
inline constexpr bool is_traceable_v =
    std::is_base_of_v<detail::TracedModuleBase, T> ||
    requires { requires std::is_base_of_v<detail::TracedModuleBase, typename T::ContainedType>; } ||
    requires(T* p) { requires detail::is_traceable_tag<decltype(tracetorch_traceable_marker(p))>::value; };

namespace detail {

/// The traced class (`Traced<Impl, Name>`) of a holder, an Impl or a traced class.
template <class T>
struct traced_type {
  using type = typename decltype(tracetorch_traceable_marker(static_cast<T*>(nullptr)))::holder::ContainedType;
};
template <class T>
  requires std::is_base_of_v<TracedModuleBase, T>
struct traced_type<T> {
  using type = T;
};
template <class T>
  requires requires { typename T::ContainedType; } && std::is_base_of_v<TracedModuleBase, typename T::ContainedType>
struct traced_type<T> {
  using type = typename T::ContainedType;
};
template <class T>
using traced_type_t = typename traced_type<T>::type;

}  // namespace detail
}  // namespace tracetorch

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
