#pragma once
/// \file
/// Opening a checkpoint: a folder, one `.safetensors` file, or transformers' sharded
/// `model.safetensors.index.json`, whose shards must hold exactly the tensors it puts in them.
/// Every file is opened and its header validated before anything is loaded.

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/checkpoint/options.hpp"
#include "tracetorch/detail/checkpoint/shard_path.hpp"
#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/safetensors/format.hpp"
#include "tracetorch/detail/fs/stdio_file.hpp"
#include "tracetorch/detail/text/json_unique_keys.hpp"
#include "tracetorch/detail/text/message_text.hpp"

namespace tracetorch::detail {

/// A checkpoint whose files are open and whose headers are validated.
struct OpenCheckpoint {
  std::filesystem::path source;                   ///< the file or index errors name
  std::vector<safetensors::Reader> readers;       ///< one per file
  std::map<std::string, std::size_t> reader_of;   ///< tensor name -> index into readers
};

/// The index file's JSON: at most kSafetensorsMaxHeader bytes, no key twice.
inline boost::json::value read_checkpoint_index(const std::filesystem::path& index) {
  auto [file, size] = open_for_reading(index);
  if (size > kSafetensorsMaxHeader) {
    checkpoint_failed(index, "index is " + std::to_string(size) + " bytes, over the limit of " +
                                 std::to_string(kSafetensorsMaxHeader));
  }
  std::string text(size, '\0');
  read_exactly(file.get(), index, 0, text.data(), size);
  JsonProblem problem;
  auto json = parse_json_unique_keys(text, problem);
  if (problem.duplicate_key) checkpoint_failed(index, "index has duplicate key " + quoted_for_message(*problem.duplicate_key));
  if (!json) checkpoint_failed(index, "index is not valid JSON: " + problem.error);
  return std::move(*json);
}

/// The index's `"weight_map"`: tensor name -> shard file name.
inline const boost::json::object& checkpoint_weight_map(const std::filesystem::path& index, const boost::json::value& json) {
  const auto* object = json.if_object();
  if (object == nullptr) checkpoint_failed(index, "index is " + json_for_message(json) + ", not a JSON object");
  const auto* map_value = object->if_contains("weight_map");
  if (map_value == nullptr) checkpoint_failed(index, "index has no \"weight_map\"");
  const auto* weight_map = map_value->if_object();
  if (weight_map == nullptr) {
    checkpoint_failed(index, "\"weight_map\" is " + json_for_message(*map_value) + ", not an object of file names");
  }
  return *weight_map;
}

/// Each tensor's shard file, checked in the weight map's order (checkpoint_shard).
inline std::map<std::string, std::filesystem::path> checkpoint_shards_of(const std::filesystem::path& index,
                                                                         const boost::json::object& weight_map,
                                                                         const checkpoint::Options& options) {
  const auto folder = checkpoint_folder(index.has_parent_path() ? index.parent_path() : std::filesystem::path("."));
  std::map<std::string, std::filesystem::path> shard_of;
  for (const auto& [key, value] : weight_map) {
    const std::string tensor(key);
    const auto* name = value.if_string();
    if (name == nullptr) {
      checkpoint_failed(index, "tensor " + quoted_for_message(tensor) + ": shard is " + json_for_message(value) +
                                   ", not a file name");
    }
    shard_of.emplace(tensor, checkpoint_shard(index, folder, tensor, std::string(*name), options));
  }
  return shard_of;
}

/// Opens each shard once and checks that it holds exactly the tensors the index puts in it.
inline OpenCheckpoint open_checkpoint_shards(const std::filesystem::path& index,
                                             const std::map<std::string, std::filesystem::path>& shard_of) {
  std::map<std::filesystem::path, std::set<std::string>> wanted;  // shard -> the tensors the index puts there
  for (const auto& [tensor, shard] : shard_of) wanted[shard].insert(tensor);
  OpenCheckpoint out{.source = index};
  for (const auto& [shard, tensors] : wanted) {
    out.readers.emplace_back(shard);
    const auto& reader = out.readers.back();
    for (const auto& tensor : tensors) {
      if (!reader.contains(tensor)) {
        checkpoint_failed(index, "tensor " + quoted_for_message(tensor) + ": the index puts it in " + shard.string() +
                                     ", which does not hold it");
      }
      out.reader_of.emplace(tensor, out.readers.size() - 1);
    }
    for (const auto& info : reader.header().tensors) {
      const auto listed = shard_of.find(info.name);
      if (listed == shard_of.end() || listed->second != shard) {
        checkpoint_failed(index, "shard " + shard.string() + " holds tensor " + quoted_for_message(info.name) +
                                     (listed == shard_of.end() ? ", which the index does not list"
                                                               : ", which the index puts in " + listed->second.string()));
      }
    }
  }
  return out;
}

/// Reads and validates `model.safetensors.index.json`, opens each shard, and checks that each
/// shard holds exactly the tensors the index puts in it.
inline OpenCheckpoint open_checkpoint_index(const std::filesystem::path& index, const checkpoint::Options& options) {
  const auto json = read_checkpoint_index(index);
  return open_checkpoint_shards(index, checkpoint_shards_of(index, checkpoint_weight_map(index, json), options));
}

/// A folder (its `model.safetensors`, else its `model.safetensors.index.json`), an index (a name
/// ending in `.json`) or one `.safetensors` file, opened.
inline OpenCheckpoint open_checkpoint(const std::filesystem::path& path, const checkpoint::Options& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (std::filesystem::exists(path / "model.safetensors", ec)) return open_checkpoint(path / "model.safetensors", options);
    if (std::filesystem::exists(path / "model.safetensors.index.json", ec)) {
      return open_checkpoint_index(path / "model.safetensors.index.json", options);
    }
    checkpoint_failed(path, "the folder has neither model.safetensors nor model.safetensors.index.json");
  }
  if (path.extension() == ".json") return open_checkpoint_index(path, options);
  OpenCheckpoint out{.source = path};
  out.readers.emplace_back(path);
  for (const auto& info : out.readers.back().header().tensors) out.reader_of.emplace(info.name, 0);
  return out;
}

}  // namespace tracetorch::detail
