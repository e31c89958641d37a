#pragma once
/// \file
/// A multi-rank trace merged into one trace in transformers' format, as one process would have
/// written it: each sharded value rebuilt from its shards (concatenated in rank order along its
/// recorded dimension, its record's shape and statistics made anew), each replicated value
/// checked equal on every rank. What does not fit is a RankFinding naming the module and the
/// rank: a rank whose value differs from rank 0's, a shard that does not sit where the ranks'
/// layout puts it (rank r's slice after ranks 0..r-1), and, against a reference, the shard of
/// one rank diverging while the other ranks' match.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tracetorch/detail/debugger/tensor_stats.hpp"
#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"
#include "tracetorch/detail/text/python_json.hpp"
#include "tracetorch/detail/trace_format/rank_traces.hpp"

namespace tracetorch::detail {

/// Something of one rank that the merge found wrong.
struct RankFinding {
  int rank = 0;
  std::string module_path, location, message;
};

/// A value rebuilt from shards: where it is, its file, and where each rank's shard sits in it.
struct MergedShard {
  ValueKey key;
  std::string file;  // the tensor file's name, the same in every rank's trace
  std::int64_t dim = 0;
  std::vector<std::int64_t> offsets, sizes;  // rank by rank, in the merged tensor
};

struct MergedRankTrace {
  std::filesystem::path directory;  // the merged trace
  std::vector<std::filesystem::path> rank_directories;
  std::size_t replicated = 0;
  std::vector<MergedShard> shards;
  std::vector<RankFinding> findings;
};

/// "./x.safetensors" -> "x.safetensors"; an Error for a printed value (use_repr=True).
inline std::string tensor_file_of(const boost::json::object& record, const ValueKey& key) {
  const auto* value = record.if_contains(trace_format::kValue);
  const std::string_view prefix = trace_format::kTensorFilePrefix;
  if (value == nullptr || !value->is_string() || !value->as_string().starts_with(prefix)) {
    throw Error(std::get<0>(key) + " " + std::get<2>(key) +
                ": the rank traces hold printed values, which cannot be merged: trace with --safetensors (use_repr=False)");
  }
  return std::string(value->as_string().subview().substr(prefix.size()));
}

/// Rebuilds one sharded value into `out_dir` and its record; findings for misplaced shards.
inline void merge_sharded_value(const std::vector<RankTrace>& ranks, const ValueKey& key, boost::json::object& record,
                                const std::filesystem::path& out_dir, MergedRankTrace& merged) {
  MergedShard shard{key, tensor_file_of(record, key), ranks[0].shards.at(key).dim, {}, {}};
  std::vector<torch::Tensor> parts;
  std::int64_t expected = 0;
  const std::string& module = std::get<0>(key);
  const std::string& location = std::get<2>(key);
  for (const auto& rank : ranks) {
    const auto found = rank.shards.find(key);
    if (found == rank.shards.end()) {
      merged.findings.push_back({rank.rank, module, location, "records no shard spec for this value, which rank 0 shards"});
      return;
    }
    const auto& spec = found->second;
    if (spec.offset != expected || spec.dim != shard.dim) {
      merged.findings.push_back({rank.rank, module, location,
                                 "its shard sits at [" + std::to_string(spec.offset) + ", " + std::to_string(spec.offset + spec.size) +
                                     ") along dim " + std::to_string(spec.dim) + ", where the ranks' layout puts it at [" +
                                     std::to_string(expected) + ", " + std::to_string(expected + spec.size) + ")"});
    }
    parts.push_back(safetensors::load_single(rank.directory / shard.file));
    shard.offsets.push_back(expected);
    shard.sizes.push_back(parts.back().size(shard.dim));
    expected += parts.back().size(shard.dim);
  }
  const auto full = torch::cat(parts, shard.dim);
  safetensors::save(out_dir / shard.file, full);
  boost::json::object rebuilt;
  rebuilt[trace_format::kShape] = shape_repr(full.sizes());
  rebuilt[trace_format::kDtype] = dtype_repr(full.scalar_type());
  rebuilt[trace_format::kValue] = record.at(trace_format::kValue);
  const auto type = full.scalar_type();
  if (type == torch::kFloat16 || type == torch::kFloat32 || type == torch::kBFloat16) add_statistics(rebuilt, full);
  record = std::move(rebuilt);
  merged.shards.push_back(std::move(shard));
}

/// Checks the replicated tensor file `file` equal on every rank; rank 0's goes to `out_dir`.
inline void merge_replicated_file(const std::vector<RankTrace>& ranks, const ValueKey& key, const std::string& file,
                                  const std::filesystem::path& out_dir, MergedRankTrace& merged) {
  const auto first = safetensors::load_single(ranks[0].directory / file);
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].shards.count(key) != 0) {
      merged.findings.push_back({ranks[r].rank, std::get<0>(key), std::get<2>(key), "shards this value, which rank 0 holds whole"});
      continue;
    }
    const auto other = safetensors::load_single(ranks[r].directory / file);
    if (other.sizes() != first.sizes() || !torch::equal(other, first)) {
      std::string why = "its value differs from rank 0's, which every rank should hold the same";
      if (other.sizes() == first.sizes() && other.is_floating_point()) {
        why += " (max |difference| " + std::to_string((other.to(torch::kFloat64) - first.to(torch::kFloat64)).abs().max().item<double>()) + ")";
      }
      merged.findings.push_back({ranks[r].rank, std::get<0>(key), std::get<2>(key), why});
    }
  }
  std::filesystem::copy_file(ranks[0].directory / file, out_dir / file, std::filesystem::copy_options::overwrite_existing);
  ++merged.replicated;
}

/// Checks one replicated value equal on every rank; rank 0's file goes to `out_dir`.
inline void merge_replicated_value(const std::vector<RankTrace>& ranks, const ValueKey& key, const boost::json::object& record,
                                   const std::filesystem::path& out_dir, MergedRankTrace& merged) {
  merge_replicated_file(ranks, key, tensor_file_of(record, key), out_dir, merged);
}

/// The tensor files no record names (the root's outputs: <Root>_outputs*), replicated.
inline void merge_unrecorded_files(const std::vector<RankTrace>& ranks, const std::filesystem::path& out_dir, MergedRankTrace& merged) {
  const std::string root(ranks[0].tree.at(trace_format::kModulePath).as_string());
  for (const auto& entry : std::filesystem::directory_iterator(ranks[0].directory)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(trace_format::kTensorFileExtension) || std::filesystem::exists(out_dir / name)) continue;
    merge_replicated_file(ranks, ValueKey{root, 0, name}, name, out_dir, merged);
  }
}

/// Writes `tree` as the merged trace's FULL_TENSORS and SUMMARY files, named as rank 0's.
inline void write_merged_tree(const boost::json::value& tree, const std::filesystem::path& rank0_full, const std::filesystem::path& out_dir) {
  const std::string name = rank0_full.filename().string();
  const std::string root = name.substr(0, name.size() - std::string_view(trace_format::kFullTensorsSuffix).size());
  for (const bool summary : {false, true}) {
    std::string text;
    append_python_json(text, tree, 0, summary);
    std::ofstream out(out_dir / (root + (summary ? trace_format::kSummarySuffix : trace_format::kFullTensorsSuffix)), std::ios::binary);
    out << text;
    if (!out) throw Error(out_dir.string() + ": cannot write the merged trace");
  }
}

/// Merges the multi-rank trace `dir` into `out_dir` (created; see the file comment).
inline MergedRankTrace merge_rank_traces(const std::filesystem::path& dir, const std::filesystem::path& out_dir) {
  auto ranks = read_rank_traces(dir);
  MergedRankTrace merged;
  merged.directory = out_dir;
  for (const auto& rank : ranks) merged.rank_directories.push_back(rank.directory);
  std::filesystem::create_directories(out_dir);
  boost::json::value tree = ranks[0].tree;
  for_each_rank_value(tree, [&](const ValueKey& key, boost::json::object& record) {
    if (ranks[0].shards.count(key) != 0) {
      merge_sharded_value(ranks, key, record, out_dir, merged);
    } else {
      merge_replicated_value(ranks, key, record, out_dir, merged);
    }
  });
  merge_unrecorded_files(ranks, out_dir, merged);
  write_merged_tree(tree, ranks[0].full_tensors, out_dir);
  return merged;
}

/// Against a reference trace with tensor files (`reference_dir`): the first sharded value where
/// some ranks' shards diverge from the reference's slice while the others' match, each such rank
/// a finding. (Where every rank diverges the cause is upstream of the shards, and the diff names it.)
inline void attribute_diverging_shards(MergedRankTrace& merged, const std::filesystem::path& reference_dir, double atol, double rtol) {
  std::error_code ec;
  for (const auto& shard : merged.shards) {
    const auto reference_file = reference_dir / shard.file;
    if (!std::filesystem::is_regular_file(reference_file, ec)) continue;
    const auto reference = safetensors::load_single(reference_file).to(torch::kFloat64);
    std::vector<std::pair<int, double>> diverging;
    for (std::size_t r = 0; r < shard.offsets.size(); ++r) {
      if (reference.dim() <= shard.dim || reference.size(shard.dim) < shard.offsets[r] + shard.sizes[r]) break;
      const auto expected = reference.narrow(shard.dim, shard.offsets[r], shard.sizes[r]);
      const auto ours = safetensors::load_single(merged.rank_directories[r] / shard.file).to(torch::kFloat64);
      if (ours.sizes() != expected.sizes()) continue;
      const auto excess = (ours - expected).abs() - (atol + rtol * expected.abs());
      if (excess.max().item<double>() > 0) diverging.emplace_back(static_cast<int>(r), (ours - expected).abs().max().item<double>());
    }
    if (diverging.empty() || diverging.size() == shard.offsets.size()) continue;
    for (const auto& [rank, difference] : diverging) {
      merged.findings.push_back({rank, std::get<0>(shard.key), std::get<2>(shard.key),
                                 "its shard diverges from the reference's slice [" + std::to_string(shard.offsets[rank]) + ", " +
                                     std::to_string(shard.offsets[rank] + shard.sizes[rank]) + ") along dim " +
                                     std::to_string(shard.dim) + " (max |difference| " + std::to_string(difference) +
                                     ") while the other ranks' match"});
    }
    return;
  }
}

/// The findings as lines: "rank R: MODULE LOCATION: message".
inline std::string rank_findings_text(const MergedRankTrace& merged) {
  std::string text = "ranks: " + std::to_string(merged.rank_directories.size()) + " merged, " +
                     std::to_string(merged.shards.size()) + " sharded values rebuilt, " + std::to_string(merged.replicated) +
                     " replicated values checked on every rank\n";
  for (const auto& f : merged.findings) text += "rank " + std::to_string(f.rank) + ": " + f.module_path + " " + f.location + ": " + f.message + "\n";
  return text;
}

}  // namespace tracetorch::detail
