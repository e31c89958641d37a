#pragma once
/// \file
/// Defines `tracetorch::Error` for the detail headers, which never include a public header;
/// users include tracetorch/error.hpp.

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
