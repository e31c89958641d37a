#pragma once
/// \file
/// Reading a multi-rank trace (detail/parallel/rank_trace.hpp wrote it): the index, each rank's
/// trace tree and shard specs, every rank accounted for. A rank without its trace or its shard
/// specs (the last file a rank writes) is missing: an Error naming it.

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/detail/parallel/rank_trace.hpp"
#include "tracetorch/detail/trace_format/format.hpp"

namespace tracetorch::detail {

/// Where a value sits in a trace: module path, which call of it (0 the first), location.
using ValueKey = std::tuple<std::string, std::size_t, std::string>;

/// One rank's record of a sharded value.
struct RankShard {
  std::int64_t dim = 0, offset = 0, size = 0;
  std::vector<std::int64_t> full_shape;
};

/// One rank's trace, read.
struct RankTrace {
  int rank = 0;
  std::filesystem::path directory, full_tensors;
  boost::json::value tree;
  std::map<ValueKey, RankShard> shards;
};

/// True where `path` is a multi-rank trace: a directory holding tracetorch_ranks.json.
inline bool is_multi_rank_trace(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path / trace_format::kRankIndexFile, ec);
}

/// The file `dir/<Root>_debug_tree_FULL_TENSORS.json`, or an empty path.
inline std::filesystem::path find_full_tensors_file(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().ends_with(trace_format::kFullTensorsSuffix)) return entry.path();
  }
  return {};
}

inline std::map<ValueKey, RankShard> read_shard_specs(const std::filesystem::path& file, int rank) {
  const auto json = boost::json::parse(read_regular_file(file, kMaxTraceJsonBytes, "a shard-spec file"));
  const auto fail = [&](const std::string& why) { throw Error(file.string() + ": " + why); };
  if (!json.is_object() || !json.as_object().contains("values")) fail("not a tracetorch_shards.json (no \"values\")");
  if (json.at("rank").to_number<int>() != rank) fail("is rank " + std::to_string(json.at("rank").to_number<int>()) + "'s, in the place of rank " + std::to_string(rank));
  std::map<ValueKey, RankShard> shards;
  for (const auto& entry : json.at("values").as_array()) {
    const auto& o = entry.as_object();
    RankShard shard{o.at("dim").to_number<std::int64_t>(), o.at("offset").to_number<std::int64_t>(), o.at("size").to_number<std::int64_t>(), {}};
    for (const auto& n : o.at("full_shape").as_array()) shard.full_shape.push_back(n.to_number<std::int64_t>());
    shards.emplace(ValueKey{std::string(o.at("module_path").as_string()), o.at("call").to_number<std::size_t>(),
                            std::string(o.at("location").as_string())},
                   std::move(shard));
  }
  return shards;
}

/// Every rank of the multi-rank trace `dir`, read; an Error naming each missing rank.
inline std::vector<RankTrace> read_rank_traces(const std::filesystem::path& dir) {
  const auto index_path = dir / trace_format::kRankIndexFile;
  if (!is_multi_rank_trace(dir)) {
    throw Error(dir.string() + ": not a multi-rank trace: no " + trace_format::kRankIndexFile + " (rank 0 writes it)");
  }
  const auto index = boost::json::parse(read_regular_file(index_path, kMaxConfigBytes, "a rank index"));
  const auto& ranks = index.at("ranks").as_array();
  std::vector<RankTrace> traces;
  std::string missing;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankTrace trace;
    trace.rank = static_cast<int>(r);
    trace.directory = dir / std::string(ranks[r].as_string());
    trace.full_tensors = find_full_tensors_file(trace.directory);
    const auto specs = trace.directory / trace_format::kShardSpecFile;
    std::error_code ec;
    std::string why;
    if (trace.full_tensors.empty()) {
      why = "no trace in " + trace.directory.string();
    } else if (!std::filesystem::is_regular_file(specs, ec)) {
      why = "no " + std::string(trace_format::kShardSpecFile) + " in " + trace.directory.string() + " (the rank did not finish)";
    }
    if (!why.empty()) {
      missing += "\n  rank " + std::to_string(r) + ": " + why;
      continue;
    }
    trace.tree = boost::json::parse(read_regular_file(trace.full_tensors, kMaxTraceJsonBytes, "a trace"));
    trace.shards = read_shard_specs(specs, trace.rank);
    traces.push_back(std::move(trace));
  }
  if (!missing.empty()) {
    throw Error(dir.string() + ": a trace of " + std::to_string(ranks.size()) + " ranks with ranks missing:" + missing);
  }
  return traces;
}

/// Calls `visit(key, record)` for each tensor record of `tree`, in the trace's order.
template <class Visit>
void for_each_rank_value(boost::json::value& tree, Visit&& visit) {
  std::map<std::string, std::size_t> calls;
  const auto walk = [&](const auto& self, boost::json::object& node) -> void {
    const std::string path(node.at(trace_format::kModulePath).as_string());
    const std::size_t call = calls[path]++;
    auto on_record = [&](const std::string& location, const boost::json::object& record) {
      visit(ValueKey{path, call, location}, const_cast<boost::json::object&>(record));
    };
    if (const auto* inputs = node.if_contains(trace_format::kInputs)) for_each_tensor_record(*inputs, trace_format::kInputs, on_record);
    if (const auto* outputs = node.if_contains(trace_format::kOutputs)) {
      for_each_tensor_record(*outputs, trace_format::kOutputs, on_record);
    }
    if (auto* children = node.if_contains(trace_format::kChildren)) {
      for (auto& child : children->as_array()) self(self, child.as_object());
    }
  };
  walk(walk, tree.as_object());
}

}  // namespace tracetorch::detail
