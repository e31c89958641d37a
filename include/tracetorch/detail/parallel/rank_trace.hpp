#pragma once
/// \file
/// What each rank of a tensor-parallel trace writes beside transformers' files, which stay as
/// they are: rank_<r>/tracetorch_shards.json, the shard spec (dim, offset, size, full shape) of
/// every sharded value of its trace, and (rank 0) the index of the ranks. No LibTorch.

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/detail/parallel/shard_spec.hpp"
#include "tracetorch/detail/text/python_json.hpp"
#include "tracetorch/detail/trace_format/format.hpp"

namespace tracetorch::detail {

/// A module split over the ranks: its path in the trace, how, and this rank's slice of its
/// split features (the last dimension of the values it shards).
struct ModuleShard {
  std::string module_path;
  ParallelStyle style = ParallelStyle::colwise;
  ShardSpec features;
};

/// rank_<r>
inline std::string rank_directory_name(int rank) { return trace_format::kRankDirectoryPrefix + std::to_string(rank); }

/// [2, 7, 64] from "torch.Size([2, 7, 64])"; empty when it is not one.
inline std::vector<std::int64_t> parse_shape_repr(std::string_view text) {
  std::vector<std::int64_t> shape;
  const std::string_view prefix = trace_format::kShapePrefix, suffix = trace_format::kShapeSuffix;
  if (!text.starts_with(prefix) || !text.ends_with(suffix)) return shape;
  text = text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
  while (!text.empty()) {
    const auto comma = text.find(',');
    shape.push_back(std::stoll(std::string(text.substr(0, comma))));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
    while (text.starts_with(' ')) text.remove_prefix(1);
  }
  return shape;
}

/// Calls `visit(location, record)` for each tensor record under `value`, the location named as
/// the diff names it ("inputs.args.0", "outputs.1").
template <class Visit>
void for_each_tensor_record(const boost::json::value& value, const std::string& location, Visit& visit) {
  if (value.is_object()) {
    const auto& object = value.as_object();
    if (object.contains(trace_format::kShape) && object.contains(trace_format::kDtype)) {
      visit(location, object);
      return;
    }
    for (const auto& entry : object) for_each_tensor_record(entry.value(), location + "." + std::string(entry.key()), visit);
  } else if (value.is_array()) {
    const auto& array = value.as_array();
    for (std::size_t i = 0; i < array.size(); ++i) for_each_tensor_record(array[i], location + "." + std::to_string(i), visit);
  }
}

/// Whether a split module's value at `location` ("inputs.args.0", "outputs.1") is split over the
/// ranks: a colwise module's outputs, a rowwise module's first argument (its outputs are
/// all-reduced, whole), every value of a local module. The shard-spec file and replay on a rank
/// both follow it; each also checks the value's last dimension against the split.
inline bool is_split_value(ParallelStyle style, std::string_view location) {
  const auto under = [&](std::string_view prefix) {
    return location.starts_with(prefix) && (location.size() == prefix.size() || location[prefix.size()] == '.');
  };
  switch (style) {
    case ParallelStyle::colwise: return under(trace_format::kOutputs);
    case ParallelStyle::rowwise: return under(std::string(trace_format::kInputs) + "." + trace_format::kArgs + ".0");
    case ParallelStyle::local: return under(trace_format::kInputs) || under(trace_format::kOutputs);
  }
  return false;
}

/// The shard-spec entries of one call of a split module: its split values (is_split_value) whose
/// last dimension is the split's size.
inline void shard_entries_of_call(const boost::json::object& node, const ModuleShard& shard, std::size_t call,
                                  boost::json::array& out) {
  auto visit = [&](const std::string& location, const boost::json::object& record) {
    if (!is_split_value(shard.style, location)) return;
    auto shape = parse_shape_repr(record.at(trace_format::kShape).as_string());
    if (shape.empty() || shape.back() != shard.features.size) return;
    const auto dim = static_cast<std::int64_t>(shape.size() - 1);
    shape.back() = shard.features.full;
    boost::json::array full_shape(shape.begin(), shape.end());
    out.push_back(boost::json::object{{"module_path", shard.module_path}, {"call", call}, {"location", location},
                                      {"style", parallel_style_name(shard.style)}, {"dim", dim},
                                      {"offset", shard.features.offset}, {"size", shard.features.size}, {"full_shape", full_shape}});
  };
  if (const auto* inputs = node.if_contains(trace_format::kInputs)) for_each_tensor_record(*inputs, trace_format::kInputs, visit);
  if (const auto* outputs = node.if_contains(trace_format::kOutputs)) for_each_tensor_record(*outputs, trace_format::kOutputs, visit);
}

/// Writes `json` as Python's json.dump(indent=2) would, through a staged file renamed into place.
inline void write_json_file_whole(const std::filesystem::path& path, const boost::json::value& json) {
  std::string text;
  append_python_json(text, json, 0, false);
  const auto staged = std::filesystem::path(path.string() + ".partial");
  std::ofstream out(staged, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error("tracetorch: " + staged.string() + ": cannot write the file");
  std::filesystem::rename(staged, path);
}

/// The shard-spec file's JSON for the trace `full_tensors` of rank `rank`.
inline boost::json::object shard_spec_json(const std::filesystem::path& full_tensors, int rank, int world_size,
                                           const std::vector<ModuleShard>& layout) {
  std::map<std::string, const ModuleShard*> by_path;
  for (const auto& shard : layout) by_path.emplace(shard.module_path, &shard);
  const auto tree = boost::json::parse(read_regular_file(full_tensors, kMaxTraceJsonBytes, "a trace"));
  boost::json::array values;
  std::map<std::string, std::size_t> calls;
  const auto walk = [&](const auto& self, const boost::json::object& node) -> void {
    const std::string path(node.at(trace_format::kModulePath).as_string());
    const std::size_t call = calls[path]++;
    if (const auto found = by_path.find(path); found != by_path.end()) shard_entries_of_call(node, *found->second, call, values);
    if (const auto* children = node.if_contains(trace_format::kChildren)) {
      for (const auto& child : children->as_array()) self(self, child.as_object());
    }
  };
  walk(walk, tree.as_object());
  return {{"rank", rank}, {"world_size", world_size}, {"values", std::move(values)}};
}

/// Writes rank_<r>/tracetorch_shards.json beside the rank's trace: the last file a rank writes,
/// so its presence says the rank finished.
inline void write_shard_specs(const std::filesystem::path& rank_dir, const std::filesystem::path& full_tensors, int rank,
                              int world_size, const std::vector<ModuleShard>& layout) {
  write_json_file_whole(rank_dir / trace_format::kShardSpecFile, shard_spec_json(full_tensors, rank, world_size, layout));
}

/// Rank 0's index of the ranks: {"world_size": N, "ranks": ["rank_0", ...]}.
inline void write_rank_index(const std::filesystem::path& debug_path, int world_size) {
  boost::json::array ranks;
  for (int r = 0; r < world_size; ++r) ranks.emplace_back(rank_directory_name(r));
  std::filesystem::create_directories(debug_path);
  write_json_file_whole(debug_path / trace_format::kRankIndexFile, boost::json::object{{"world_size", world_size}, {"ranks", ranks}});
}

}  // namespace tracetorch::detail
