#pragma once
/// \file
/// What every part of tracetorch-scan-skipped shares: its error type (a bad input, exit 2) and
/// its count of work done (--print-work-steps).

#include <cstdint>
#include <stdexcept>

namespace tracetorch::scan_skipped {

/// Bad input: the message names the file (and line) and the cause; exit 2.
struct ScanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Work done: characters lexed plus tokens visited by the parser. The scan is linear in its
/// input; --print-work-steps prints this count so that a test can check that without timing.
inline std::uint64_t work_steps = 0;

}  // namespace tracetorch::scan_skipped
