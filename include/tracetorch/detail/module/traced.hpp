#pragma once
/// \file
/// `Traced<Impl, Name>`: the class derived from a user's `Impl` whose `forward` has the exact
/// signature of `Impl::forward` and hands the call to the attached observers (detail/module/call.hpp).

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/detail/module/debug_io.hpp"
#include "tracetorch/detail/module/nonfinite_request.hpp"
#include "tracetorch/detail/module/replay_arguments.hpp"

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
// attached; otherwise the observers see the call (detail/module/call.hpp).
#ifndef TRACETORCH_DISABLE
#define TRACETORCH_DETAIL_FORWARD_BODY(Types, values)                                            \
  if constexpr (::tracetorch::detail::any_nonfinite_keywords<Types...>) {                         \
    if (const auto request = ::tracetorch::detail::nonfinite_request(values...);                  \
        request.found != nullptr && !::tracetorch::detail::nonfinite_running()) [[unlikely]] {    \
      return ::tracetorch::detail::run_finding_nonfinite<R>(*this, this->traced_name(), request, [&]() -> R { \
        return this->call(std::forward<Types>(values)...);                                        \
      });                                                                                         \
    }                                                                                             \
  }                                                                                               \
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
    bool replay_forward(ReplayRequest& request) override {                                        \
      replay_forward_with<A...>(request, [this](A... args) { (void)this->forward(std::forward<A>(args)...); }); \
      return true;                                                                                \
    }                                                                                             \
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

}  // namespace tracetorch::detail
