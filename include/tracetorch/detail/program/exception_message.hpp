#pragma once
/// \file
/// An exception's message as a program prints it: one line, where LibTorch's own errors
/// (`c10::Error`, a shape mismatch in a port's forward) carry thirty lines of C++ backtrace.

#include <c10/util/Exception.h>

#include <exception>
#include <string_view>

namespace tracetorch::detail {

/// `e.what()`, without the backtrace where `e` is a c10::Error.
inline std::string_view exception_message(const std::exception& e) noexcept {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace tracetorch::detail
