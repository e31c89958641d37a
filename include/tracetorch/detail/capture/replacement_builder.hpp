#pragma once
/// \file
/// How a registered replacement is built in place of an original (tracetorch::Replaceable): the
/// constructor arguments and the forward signature, each checked against the original's, and one
/// call thunk (a function pointer) that runs the built module's traced forward.

#include <torch/torch.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/traceable.hpp"

namespace tracetorch::detail {

/// The module class a holder or an Impl stands for: the holder's ContainedType (the traced class,
/// or the plain Impl under TRACETORCH_DISABLE), the traced class of a TRACEABLE Impl, else T.
template <class T>
struct built_type {
  using type = T;
};
template <class T>
  requires requires { typename T::ContainedType; }
struct built_type<T> {
  using type = typename T::ContainedType;
};
template <class T>
  requires(!requires { typename T::ContainedType; } && is_traceable_v<T>)
struct built_type<T> {
  using type = traced_type_t<T>;
};
template <class T>
using built_type_t = typename built_type<T>::type;

/// `R(A...)` of a module's one non-template forward (qualifiers dropped).
template <class Pointer>
struct forward_function {};
#define TRACETORCH_DETAIL_FORWARD_FUNCTION(QUALIFIERS)   \
  template <class C, class R, class... A>                 \
  struct forward_function<R (C::*)(A...) QUALIFIERS> {    \
    using type = R(A...);                                 \
  }
TRACETORCH_DETAIL_FORWARD_FUNCTION();
TRACETORCH_DETAIL_FORWARD_FUNCTION(const);
TRACETORCH_DETAIL_FORWARD_FUNCTION(noexcept);
TRACETORCH_DETAIL_FORWARD_FUNCTION(const noexcept);
#undef TRACETORCH_DETAIL_FORWARD_FUNCTION

template <class Module>
using forward_function_t = typename forward_function<typename forward_pointer<Module>::type>::type;

/// The constructor arguments as a registry key: their types without references or const.
template <class... Args>
using arguments_key = std::tuple<std::remove_cvref_t<Args>...>;
/// The constructor arguments as handed to a builder: const references to the caller's values.
template <class... Args>
using arguments_refs = std::tuple<const std::remove_cvref_t<Args>&...>;

/// A module built by the registry: owned by `module`, called through `call` (a
/// `R (*)(void*, A...)` stored type-erased, R(A...) being `*forward_type`) on `object`.
struct BuiltModule {
  std::shared_ptr<torch::nn::Module> module;
  void* object = nullptr;
  void (*call)() = nullptr;
  const std::type_info* forward_type = nullptr;
};

/// Builds a replacement from the arguments an original is built with (`*arguments`, an
/// arguments_key type); `build` reads an arguments_refs of the same types.
struct ReplacementBuilder {
  const std::type_info* arguments = nullptr;
  BuiltModule (*build)(const void* arguments) = nullptr;
};

/// The thunk: the module's traced entry point (`call`), or its forward when tracing is compiled out.
template <class Module, class R, class... A>
R call_built(void* object, A... args) {
  auto& module = *static_cast<Module*>(object);
  if constexpr (requires { module.call(std::forward<A>(args)...); }) {
    return module.call(std::forward<A>(args)...);
  } else {
    return module.forward(std::forward<A>(args)...);
  }
}

template <class Module, class R, class... A>
void (*call_thunk(R (*)(A...)))() {
  return reinterpret_cast<void (*)()>(&call_built<Module, R, A...>);
}

/// Wraps a built module with its thunk; the module needs one non-template forward.
template <class Module>
BuiltModule built_module(std::shared_ptr<Module> module) {
  using Forward = forward_function_t<Module>;
  void* object = module.get();
  return {std::move(module), object, call_thunk<Module>(static_cast<Forward*>(nullptr)), &typeid(Forward)};
}

template <class T, class... Args>
BuiltModule build_replacement_from(const void* arguments) {
  using Module = built_type_t<T>;
  const auto& given = *static_cast<const arguments_refs<Args...>*>(arguments);
  return built_module(std::apply([](const auto&... values) { return std::make_shared<Module>(values...); }, given));
}

/// The builder `replacement<T, Args...>()` registers: none without Args unless T is
/// default-constructible (a replacement used for recording only).
template <class T, class... Args>
ReplacementBuilder replacement_builder() {
  using Module = built_type_t<T>;
  constexpr bool constructible = std::is_constructible_v<Module, const std::remove_cvref_t<Args>&...>;
  static_assert(constructible || sizeof...(Args) == 0,
                "tracetorch::replacement<T, Args...>: T cannot be constructed from Args (the arguments the original is "
                "built with)");
  if constexpr (constructible && requires { typename forward_pointer<Module>::type; } &&
                !std::is_void_v<typename forward_pointer<Module>::type>) {
    return {&typeid(arguments_key<Args...>), &build_replacement_from<T, Args...>};
  } else {
    return {};
  }
}

}  // namespace tracetorch::detail
