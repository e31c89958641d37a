#pragma once
/// \file
/// Where one rank's shard sits in a full tensor, and the even split of a size over the ranks
/// (Megatron's layout: rank r holds the r-th of N equal slices). No LibTorch: the diff's merge of
/// rank traces reads these too.

#include <cstdint>
#include <string>
#include <string_view>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// How a layer is split over the ranks, as transformers' tp_plan names it: "colwise" (its output
/// features split), "rowwise" (its input features split, the partial results all-reduced), and
/// "local" (an elementwise module between the two, on the split features).
enum class ParallelStyle { colwise, rowwise, local };

inline std::string_view parallel_style_name(ParallelStyle style) {
  constexpr std::string_view names[] = {"colwise", "rowwise", "local"};  // in the enum's order
  return names[static_cast<int>(style)];
}

/// A shard along one dimension: elements [offset, offset + size) of `full`.
struct ShardSpec {
  std::int64_t offset = 0;
  std::int64_t size = 0;
  std::int64_t full = 0;
  friend bool operator==(const ShardSpec&, const ShardSpec&) = default;
};

/// Rank `rank` of `world_size`'s even slice of `full`; a tracetorch::Error naming `what` and the
/// sizes where `full` does not divide by the world size.
inline ShardSpec even_shard(std::string_view what, std::int64_t full, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error(std::string(what) + ": rank " + std::to_string(rank) + " is not in a world of " + std::to_string(world_size));
  }
  if (full % world_size != 0) {
    throw Error(std::string(what) + " is " + std::to_string(full) + ", which does not divide by the world size " +
                std::to_string(world_size));
  }
  const std::int64_t size = full / world_size;
  return {size * rank, size, full};
}

}  // namespace tracetorch::detail
