#pragma once
/// \file
/// The print options every tensor repr of tracetorch uses: torch's defaults except sci_mode
/// and linewidth, i.e. `torch.set_printoptions(sci_mode=True, linewidth=120)`.

#include <cstdint>

namespace tracetorch::detail {

inline constexpr int kPrintPrecision = 4;
inline constexpr std::int64_t kPrintThreshold = 1000;
inline constexpr std::int64_t kPrintEdgeItems = 3;
inline constexpr std::int64_t kPrintLineWidth = 120;

}  // namespace tracetorch::detail
