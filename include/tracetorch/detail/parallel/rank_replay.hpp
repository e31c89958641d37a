#pragma once
/// \file
/// Module replay on a tensor-parallel rank: the single-process reference's values cut to what
/// this rank's shards see, by the rules the shard-spec file follows (rank_trace.hpp): a colwise
/// module's outputs, a rowwise module's first argument, and every value of a local module, each
/// whose last dimension is the split's full size. Everything else is replicated and stays whole.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/parallel/rank_trace.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"

namespace tracetorch::detail {

/// Sets each split value's slice (TraceSlot::slice) in `trace`, for the rank whose layout is `layout`.
inline void slice_reference_for_rank(Trace& trace, const std::vector<ModuleShard>& layout) {
  std::map<std::string, const ModuleShard*, std::less<>> by_path;
  for (const auto& shard : layout) by_path.emplace(shard.module_path, &shard);
  const std::string first_argument = std::string(trace_format::kInputs) + "." + trace_format::kArgs + ".0";
  for (auto& call : trace.calls) {
    const auto found = by_path.find(call.module_path);
    if (found == by_path.end()) continue;
    const ModuleShard& shard = *found->second;
    const auto cut = [&](TraceSlot& slot) {
      if (!slot.is_tensor || slot.shape.empty() || slot.shape.back() != shard.features.full) return;
      const auto dim = static_cast<std::int64_t>(slot.shape.size() - 1);
      slot.slice = TraceSlice{dim, shard.features.offset, shard.features.size, shard.features.full};
      slot.shape.back() = shard.features.size;
    };
    for (auto& slot : call.inputs) {
      const bool first = slot.location == first_argument || slot.location.starts_with(first_argument + ".");
      if (shard.style == ParallelStyle::local || (shard.style == ParallelStyle::rowwise && first)) cut(slot);
    }
    if (shard.style == ParallelStyle::rowwise) continue;  // its outputs are all-reduced: whole
    for (auto& slot : call.outputs) cut(slot);
  }
}

}  // namespace tracetorch::detail
