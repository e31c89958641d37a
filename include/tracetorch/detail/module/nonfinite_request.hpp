#pragma once
/// \file
/// A call that asks for the non-finite sentinel through its options (`find_nonfinite`, as
/// OutputOptions has it): what a traced forward needs to notice the request. The sentinel is
/// reached through a pointer that setting the option sets (tracetorch::NonFiniteTarget), so
/// module code does not depend on the sentinel's, and a model's translation unit does not
/// compile it.

#include <torch/torch.h>

#include <atomic>
#include <concepts>
#include <functional>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/call_runner.hpp"
#include "tracetorch/nonfinite/finding.hpp"

namespace tracetorch::detail {

/// An options struct whose `find_nonfinite` says where a call's finding goes (OutputOptions).
template <class T>
concept has_nonfinite_keyword = requires(const T& options) {
  { options.find_nonfinite } -> std::convertible_to<std::optional<NonFinite>*>;
};

template <class... A>
inline constexpr bool any_nonfinite_keywords = (has_nonfinite_keyword<std::remove_cvref_t<A>> || ...);

/// The first `find_nonfinite` the call's arguments set, else null.
template <class... A>
std::optional<NonFinite>* nonfinite_request(const A&... args) {
  std::optional<NonFinite>* request = nullptr;
  const auto look = [&](const auto& arg) {
    if constexpr (has_nonfinite_keyword<std::remove_cvref_t<decltype(arg)>>) {
      if (request == nullptr) request = arg.find_nonfinite;
    }
  };
  (look(args), ...);
  return request;
}

/// True on a thread while a call asked for find_nonfinite runs: its own traced forward, entered
/// again under the watch, and sub-models given the same options do not start another.
inline bool& nonfinite_running() {
  thread_local bool running = false;
  return running;
}

/// Runs `call` (the traced forward of `root` again) under a sentinel rooted at `root`; `found`
/// is emptied first and holds the finding after, also where the call throws.
using NonFiniteRunner = void (*)(torch::nn::Module& root, std::string_view root_name, std::optional<NonFinite>& found,
                                 const std::function<void()>& call);

inline std::atomic<NonFiniteRunner>& nonfinite_runner() {
  static std::atomic<NonFiniteRunner> runner{nullptr};
  return runner;
}

/// `root` may be a module whose forward is const: the sentinel touches only its attachment
/// list, which tracing owns, not what const promises of the module.
template <class R, class Call>
R run_finding_nonfinite(const torch::nn::Module& root, std::string_view root_name, std::optional<NonFinite>& found,
                        Call&& call) {
  const NonFiniteRunner runner = nonfinite_runner().load(std::memory_order_acquire);
  if (runner == nullptr) {  // a target is set only through the constructor that sets the runner
    throw Error("tracetorch: find_nonfinite is set but the sentinel does not serve it (a NonFiniteTarget "
                "made without its constructor)");
  }
  const FlagWhileRunning running(nonfinite_running());
  auto& module = const_cast<torch::nn::Module&>(root);
  return result_through<R>([&](const std::function<void()>& run) { runner(module, root_name, found, run); }, call);
}

}  // namespace tracetorch::detail
