#pragma once
/// \file
/// What the call features a traced forward hands itself to (debug_io.hpp, nonfinite_request.hpp)
/// share: a thread's flag that says the call already runs under one, and the call's result
/// carried through a runner reached by a function pointer, which takes it as std::function<void()>.

#include <optional>
#include <type_traits>
#include <utility>

namespace tracetorch::detail {

/// Sets a thread's `flag` while it lives: the forward, entered again under the runner, and
/// sub-models given the same options do not start another.
class FlagWhileRunning {
 public:
  explicit FlagWhileRunning(bool& flag) noexcept : flag_(flag) { flag_ = true; }
  FlagWhileRunning(const FlagWhileRunning&) = delete;
  FlagWhileRunning& operator=(const FlagWhileRunning&) = delete;
  ~FlagWhileRunning() { flag_ = false; }

 private:
  bool& flag_;
};

/// `call()`'s result, `call` run by `run(std::function<void()>)`.
template <class R, class Run, class Call>
R result_through(Run&& run, Call&& call) {
  if constexpr (std::is_void_v<R>) {
    run([&] { call(); });
  } else {
    std::optional<R> result;
    run([&] { result.emplace(call()); });
    return std::move(*result);
  }
}

}  // namespace tracetorch::detail
