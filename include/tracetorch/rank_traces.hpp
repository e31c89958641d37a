#pragma once
/// \file
/// Multi-rank traces (tensor parallelism, tracetorch/distributed.hpp): every rank's trace merged
/// into the one trace a single process would write, so that tracetorch-diff compares it with a
/// single-process reference (`tracetorch-diff REF CANDIDATE` detects a multi-rank CANDIDATE by
/// its tracetorch_ranks.json; `--merge-ranks` insists on one). Needs LibTorch, not c10d.
///
/// \code
/// const auto merged = tracetorch::merge_rank_traces("dbg_tp", "dbg_tp_merged");
/// // dbg_tp_merged holds LlamaModel_debug_tree_FULL_TENSORS.json and its tensor files;
/// // merged.findings names each rank that disagrees or whose shard is misplaced.
/// const auto report = tracetorch::diff_traces("reference_trace", merged.directory);
/// \endcode

#include <filesystem>
#include <string>

#include "tracetorch/detail/diff/merge_ranks.hpp"

namespace tracetorch {

/// Something wrong with one rank: its number, the module path, the value's location, why.
using RankFinding = detail::RankFinding;
/// A merge's result: the merged trace's directory, the values rebuilt and checked, the findings.
using MergedRankTrace = detail::MergedRankTrace;

/// True where `path` is a directory holding a multi-rank trace's index (tracetorch_ranks.json).
inline bool is_multi_rank_trace(const std::filesystem::path& path) { return detail::is_multi_rank_trace(path); }

/// Merges the ranks of the trace `dir` into a single-process trace in `out_dir`: sharded values
/// concatenated in rank order along their recorded dimension, replicated values checked equal
/// on every rank. tracetorch::Error when a rank is missing (no trace, or no shard specs: it did
/// not finish), naming each, or when the traces hold printed values (merge needs --safetensors).
inline MergedRankTrace merge_rank_traces(const std::filesystem::path& dir, const std::filesystem::path& out_dir) {
  return detail::merge_rank_traces(dir, out_dir);
}

/// Names the ranks whose shard of the first such value diverges from a reference trace's slice
/// (tensor files in `reference_dir`) beyond atol + rtol * |reference| while the other ranks' match.
inline void attribute_diverging_shards(MergedRankTrace& merged, const std::filesystem::path& reference_dir, double atol, double rtol) {
  detail::attribute_diverging_shards(merged, reference_dir, atol, rtol);
}

/// "ranks: N merged, ..." then one line per finding: "rank R: MODULE LOCATION: why".
inline std::string rank_findings_text(const MergedRankTrace& merged) { return detail::rank_findings_text(merged); }

}  // namespace tracetorch
