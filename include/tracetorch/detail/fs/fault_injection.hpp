#pragma once
/// \file
/// A hook for tests to fail one step of publishing a trace as if its system call had failed
/// (tests/test_debugger_trace_publish.cpp), or to act at one instant of it. Unset, it costs one
/// relaxed atomic load per step.

#include <atomic>
#include <cerrno>
#include <string_view>

namespace tracetorch::detail {

/// Tests only. Where set, called with a step's name ("lock", "move out", "link", "exchange",
/// "move over", "move in", "place", "restore", "keep") before that step's system call; a non-zero
/// return fails the call with that errno. "lease held" is called while a spare's write lease is
/// held (staged_file_writer.hpp), for a test to open the file from another process then.
inline std::atomic<int (*)(std::string_view step)> io_fault_injector{nullptr};

/// True (errno set) where the injector fails `step`.
inline bool injected_fault(std::string_view step) noexcept {
  const auto injector = io_fault_injector.load(std::memory_order_relaxed);
  if (injector == nullptr) return false;
  const int error = injector(step);
  if (error == 0) return false;
  errno = error;
  return true;
}

}  // namespace tracetorch::detail
