#pragma once
/// \file
/// Tracing switched on from the call, as upstream models accept `debug_io=True`, `debug_io_dir=`
/// and `prune_layers=` (transformers' check_model_inputs wraps such a call in the debugger).
//
// A traced forward whose arguments include an options struct with those members checks them;
// the debugger itself is reached through a pointer that <tracetorch/debugger.hpp> sets, so model
// code compiles without it.

#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/call_runner.hpp"

namespace tracetorch::detail {

/// What a call asked for: transformers' defaults are "model_debug" and no pruning (its
/// `prune_layers` keyword defaults to None).
struct DebugIoRequest {
  std::string debug_io_dir = "model_debug";
  bool prune_layers = false;
};

/// An options struct carrying upstream's debug_io keywords.
template <class T>
concept has_debug_io_keywords = requires(const T& options) {
  { options.debug_io.value_or(false) } -> std::convertible_to<bool>;
  options.debug_io_dir;
  options.prune_layers;
};

template <class... A>
inline constexpr bool any_debug_io_keywords = (has_debug_io_keywords<std::remove_cvref_t<A>> || ...);

/// The request of the first argument that sets debug_io=true, if any.
template <class... A>
std::optional<DebugIoRequest> debug_io_request(const A&... args) {
  std::optional<DebugIoRequest> request;
  const auto look = [&](const auto& arg) {
    using T = std::remove_cvref_t<decltype(arg)>;
    if constexpr (has_debug_io_keywords<T>) {
      if (!request && arg.debug_io.value_or(false)) {
        request.emplace();
        if (arg.debug_io_dir) request->debug_io_dir = *arg.debug_io_dir;
        if (arg.prune_layers) request->prune_layers = *arg.prune_layers;
      }
    }
  };
  (look(args), ...);
  return request;
}

/// Runs `call` (the traced forward of `root` again) under a debugger rooted at `root`.
using DebugIoRunner = void (*)(torch::nn::Module& root, std::string_view root_name, const DebugIoRequest& request,
                               const std::function<void()>& call);

inline std::atomic<DebugIoRunner>& debug_io_runner() {
  static std::atomic<DebugIoRunner> runner{nullptr};
  return runner;
}

/// True on a thread while a debug_io call runs: the call under the debugger must not start
/// another one.
inline bool& debug_io_running() {
  thread_local bool running = false;
  return running;
}

template <class R, class Call>
R run_with_debug_io(torch::nn::Module& root, std::string_view root_name, const DebugIoRequest& request, Call&& call) {
  const DebugIoRunner runner = debug_io_runner().load(std::memory_order_acquire);
  if (runner == nullptr) {
    throw Error("tracetorch: debug_io=true needs the debugger: include <tracetorch/debugger.hpp> (or "
                "<tracetorch/tracetorch.hpp>) in one translation unit of the program");
  }
  const FlagWhileRunning running(debug_io_running());
  return result_through<R>([&](const std::function<void()>& run) { runner(root, root_name, request, run); }, call);
}

}  // namespace tracetorch::detail
