#pragma once
/// \file
/// The one exception type tracetorch throws for bad input and failed I/O:
/// `tracetorch::Error`, whose message names the file (where there is one) and the cause.
/// Type-only, so that detail headers include it too.

#include <stdexcept>
#include <string>

namespace tracetorch {

/// Thrown for unreadable or malformed files, unwritable paths and misuse.
/// The message names the file (where there is one) and the cause.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tracetorch
