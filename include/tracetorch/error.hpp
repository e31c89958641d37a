#pragma once
/// \file
/// The one exception type tracetorch throws for bad input and failed I/O:
/// `tracetorch::Error`, whose message names the file (where there is one) and the cause.

#include "tracetorch/detail/error.hpp"
