#pragma once
/// \file
/// Module replay on a tensor-parallel rank: the single-process reference's values cut to what
/// this rank's shards see: the split values (rank_trace.hpp's is_split_value) whose last
/// dimension is the split's full size. Everything else is replicated and stays whole.

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
  for (auto& call : trace.calls) {
    const auto found = by_path.find(call.module_path);
    if (found == by_path.end()) continue;
    const ModuleShard& shard = *found->second;
    for (auto* slots : {&call.inputs, &call.outputs}) {
      for (auto& slot : *slots) {
        if (!slot.is_tensor || slot.shape.empty() || slot.shape.back() != shard.features.full) continue;
        if (!is_split_value(shard.style, slot.location)) continue;
        const auto dim = static_cast<std::int64_t>(slot.shape.size() - 1);
        slot.slice = TraceSlice{dim, shard.features.offset, shard.features.size, shard.features.full};
        slot.shape.back() = shard.features.size;
      }
    }
  }
}

}  // namespace tracetorch::detail
