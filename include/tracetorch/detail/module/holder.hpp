#pragma once
/// \file
/// The holders `TRACEABLE` defines (`TracedHolder`, and `PlainHolder` under TRACETORCH_DISABLE):
/// `torch::nn::ModuleHolder` with call operators of forward's exact parameter types.

#include <torch/torch.h>

#include <type_traits>
#include <utility>

#include "tracetorch/detail/module/traced.hpp"

namespace tracetorch::detail {

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

}  // namespace tracetorch::detail
