#pragma once
/// \file
/// A call that asks for the non-finite sentinel through its options (`find_nonfinite`, as
/// OutputOptions has it): what a traced forward needs to notice the request. The sentinel is
/// reached through the runner that the option carries (tracetorch::NonFiniteTarget takes it
/// where it is set), so module code does not depend on the sentinel's, and a model's
/// translation unit neither parses nor compiles it.

#include <torch/torch.h>

#include <concepts>
#include <functional>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/detail/module/call_runner.hpp"
#include "tracetorch/nonfinite/finding.hpp"

namespace tracetorch::detail {

/// Runs `call` (the traced forward of `root` again) under a sentinel rooted at `root`; `found`
/// is emptied first and holds the finding after, also where the call throws.
using NonFiniteRunner = void (*)(torch::nn::Module& root, std::string_view root_name, std::optional<NonFinite>& found,
                                 const std::function<void()>& call);

/// An options struct whose `find_nonfinite` says where a call's finding goes and which runner
/// serves it (OutputOptions' NonFiniteTarget, whose constructor takes the runner from the
/// sentinel's header).
template <class T>
concept has_nonfinite_keyword = requires(const T& options) {
  { options.find_nonfinite.found() } -> std::same_as<std::optional<NonFinite>*>;
  { options.find_nonfinite.runner() } -> std::same_as<NonFiniteRunner>;
};

template <class... A>
inline constexpr bool any_nonfinite_keywords = (has_nonfinite_keyword<std::remove_cvref_t<A>> || ...);

/// A call's request: where the finding goes (null: none asked) and what serves it.
struct NonFiniteRequest {
  std::optional<NonFinite>* found = nullptr;
  NonFiniteRunner runner = nullptr;
};

/// The first `find_nonfinite` the call's arguments set, else an empty request.
template <class... A>
NonFiniteRequest nonfinite_request(const A&... args) {
  NonFiniteRequest request;
  const auto look = [&](const auto& arg) {
    if constexpr (has_nonfinite_keyword<std::remove_cvref_t<decltype(arg)>>) {
      if (request.found == nullptr) request = {arg.find_nonfinite.found(), arg.find_nonfinite.runner()};
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

/// `root` may be a module whose forward is const: the sentinel touches only its attachment
/// list, which tracing owns, not what const promises of the module.
template <class R, class Call>
R run_finding_nonfinite(const torch::nn::Module& root, std::string_view root_name, const NonFiniteRequest& request,
                        Call&& call) {
  const FlagWhileRunning running(nonfinite_running());
  auto& module = const_cast<torch::nn::Module&>(root);
  return result_through<R>([&](const std::function<void()>& run) { request.runner(module, root_name, *request.found, run); },
                           call);
}

}  // namespace tracetorch::detail
