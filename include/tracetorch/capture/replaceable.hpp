#pragma once
/// \file
/// tracetorch::Replaceable, make_replaceable and register_replaceable (documented in
/// tracetorch/patch_mapping.hpp): a submodule built as the registered replacement of its class, or
/// as the original when none is registered.

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/capture/patch_registry.hpp"
#include "tracetorch/detail/capture/replacement_builder.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch {
namespace detail {

/// The call operator of a Replaceable whose original's forward is R(A...): one indirect call (the
/// built module's thunk), no boxing of arguments or result (AnyModule boxes both).
template <class Function>
class ReplaceableCall;
template <class R, class... A>
class ReplaceableCall<R(A...)> {
 public:
  R operator()(A... args) const {
    if (call_ == nullptr) throw Error("tracetorch: a Replaceable module was called before it was built");
    return call_(object_, std::forward<A>(args)...);
  }

 protected:
  void set(const BuiltModule& built) {
    module_ = built.module;
    object_ = built.object;
    call_ = reinterpret_cast<R (*)(void*, A...)>(built.call);
  }
  std::shared_ptr<torch::nn::Module> module_;
  void* object_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};

inline std::string demangled(const std::type_info& type) { return c10::demangle(type.name()); }

/// Builds `found` in place of the original `original_name`, refusing a replacement registered
/// without these constructor arguments or whose forward differs from the original's.
template <class OriginalModule, class... Args>
BuiltModule build_registered(const PatchReplacement& found, std::string_view original_name, const Args&... args) {
  const std::string where = "tracetorch: building " + std::string(original_name) + " as its registered replacement " +
                            found.name + ": ";
  const std::type_info& wanted = typeid(arguments_key<Args...>);
  if (found.builder.build == nullptr || *found.builder.arguments != wanted) {
    throw Error(where + "it is built from " + demangled(wanted) + ", so register it as tracetorch::replacement<" +
                found.name + ", " + "those argument types>()" +
                (found.builder.build == nullptr ? std::string()
                                                : " (it was registered with " + demangled(*found.builder.arguments) + ")"));
  }
  const arguments_refs<Args...> given(args...);
  BuiltModule built = found.builder.build(&given);
  const std::type_info& forward = typeid(forward_function_t<OriginalModule>);
  if (*built.forward_type != forward) {
    throw Error(where + "its forward is " + demangled(*built.forward_type) + " but the original's is " + demangled(forward) +
                " (a replacement is called as the original)");
  }
  return built;
}

}  // namespace detail

/// A submodule of class `Original` (a TRACEABLE holder) that is built as the replacement
/// registered for that class (register_patch_mapping) when there is one, else as `Original`.
/// Called as the original (forward's exact parameter types); `ptr()` is the built module.
template <class Original>
class Replaceable : public detail::ReplaceableCall<detail::forward_function_t<detail::built_type_t<Original>>> {
 public:
  Replaceable(std::nullptr_t) {}  // NOLINT: as a holder's `{nullptr}`, built later
  explicit Replaceable(const detail::BuiltModule& built) { this->set(built); }

  const std::shared_ptr<torch::nn::Module>& ptr() const noexcept { return this->module_; }
  torch::nn::Module* operator->() const noexcept { return this->module_.get(); }
  bool is_empty() const noexcept { return this->module_ == nullptr; }
  /// The built module as `T` (an Impl, traced class or holder), or nullptr when it is not one.
  template <class T>
  auto* as() const {
    return this->module_->template as<T>();
  }
  /// Whether the registered replacement was built instead of `Original`.
  bool replaced() const { return !is_empty() && as<Original>() == nullptr; }
};

/// Builds `Original(args...)`, or the replacement registered for its class name (exact name, then
/// patterns, as find_patch_replacement), from the same arguments (passed as const references).
/// Under TRACETORCH_DISABLE class names are compiled out and the original is always built.
/// \code
/// tracetorch::Replaceable<Experts> experts = tracetorch::make_replaceable<Experts>(config);
/// \endcode
template <class Original, class... Args>
Replaceable<Original> make_replaceable(const Args&... args) {
  using Module = detail::built_type_t<Original>;
  static_assert(std::is_constructible_v<Module, const Args&...>,
                "tracetorch::make_replaceable<Original>(args...): Original cannot be constructed from args");
#ifndef TRACETORCH_DISABLE
  if (const auto found = detail::find_patch_replacement(Module::registered_name)) {
    return Replaceable<Original>(detail::build_registered<Module>(*found, Module::registered_name, args...));
  }
#endif
  return Replaceable<Original>(detail::built_module(std::make_shared<Module>(args...)));
}

/// make_replaceable, registered as `parent`'s submodule `name`: the one line a port writes.
/// \code
/// experts = tracetorch::register_replaceable<Experts>(*this, "experts", config);
/// \endcode
template <class Original, class... Args>
Replaceable<Original> register_replaceable(torch::nn::Module& parent, std::string name, const Args&... args) {
  Replaceable<Original> built = make_replaceable<Original>(args...);
  parent.register_module(std::move(name), built.ptr());
  return built;
}

}  // namespace tracetorch
