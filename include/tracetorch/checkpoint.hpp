#pragma once
/// \file
/// Loading a transformers checkpoint into a module by parameter name: PyTorch's strict
/// `load_state_dict` over `model.safetensors` or a sharded `model.safetensors.index.json`.
///
/// \code
/// auto report = tracetorch::checkpoint::load(*model, "path/to/checkpoint");   // folder or file
/// auto report = tracetorch::checkpoint::load(*model, dir, {.dtype = tracetorch::checkpoint::DtypePolicy::convert,
///                                                          .tied = {{"lm_head.weight", "model.embed_tokens.weight"}}});
/// for (const auto& c : report.converted) std::cout << c.name << "\n";
/// \endcode
///
/// - The path is a folder (its `model.safetensors`, else its `model.safetensors.index.json`, the
///   order transformers' `from_pretrained` looks in), a `.safetensors` file, or an index file
///   (a name ending in `.json`).
/// - An index is transformers' `{"metadata": {...}, "weight_map": {"tensor": "shard file"}}`. Each
///   shard must be a relative path that stays in the index's folder, also after symbolic links are
///   followed (unless Options::shard_links_may_leave_folder, for Hugging Face's cache); each shard
///   must hold exactly the tensors the index puts in it. Only the index's entries are checked so:
///   a `model.safetensors` or index given (or found in the folder) may itself be a link.
/// - The targets are `tracetorch::nn::state_dict(module)`: parameters and persistent buffers, so a
///   non-persistent buffer (`{.persistent = false}`) is neither expected nor accepted.
/// - DtypePolicy::keep (the default) refuses a tensor whose dtype differs from its target's: build
///   the module in the checkpoint's dtype (`model->to(torch::kBFloat16)`) first. DtypePolicy::convert
///   converts to the target's dtype and lists every conversion in Report::converted. Never silent.
/// - Strict (the default): a missing or unexpected name is an error listing them. Non-strict: they
///   are returned in the Report and the rest is loaded. A shape that differs is an error in both.
/// - A Tie `{name, source}` (a tied `lm_head.weight` and `embed_tokens.weight`): `name` absent from
///   the checkpoint is not missing but takes `source`'s checkpoint tensor. Present, it loads as itself.
/// - Nothing is half-loaded: every file, name, shape and dtype is checked, then every tensor is
///   read into memory, and only then copied into the module. A refusal throws tracetorch::Error
///   ("tracetorch: <file>: <cause>", naming the tensor) and leaves the module as it was. The cost
///   is memory: the checkpoint is held once in full (in its own dtype) besides the module.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch::checkpoint {

/// What happens to a checkpoint tensor whose dtype is not its target's.
enum class DtypePolicy {
  keep,     ///< refused: the module must already have the checkpoint's dtype
  convert,  ///< converted to the target's dtype, and listed in Report::converted
};

/// Declares `name` tied to `source` (transformers' tie_word_embeddings): when the checkpoint lacks
/// `name`, it is loaded from `source`'s checkpoint tensor instead of being missing.
struct Tie {
  std::string name;    ///< e.g. "lm_head.weight"
  std::string source;  ///< e.g. "model.embed_tokens.weight"
};

struct Options {
  DtypePolicy dtype = DtypePolicy::keep;
  /// PyTorch's `strict`: missing or unexpected names are an error (false: listed in the Report).
  bool strict = true;
  std::vector<Tie> tied;
  /// False (the default): a shard that is, or lies under, a symbolic link leading out of the
  /// index's folder is refused. True accepts such links (Hugging Face's cache: the files of
  /// `snapshots/<revision>/` are links to `../../blobs/`); names with `..` or an absolute path
  /// stay refused.
  bool shard_links_may_leave_folder = false;
};

/// One tensor converted under DtypePolicy::convert.
struct Conversion {
  std::string name;
  c10::ScalarType from = c10::ScalarType::Undefined;  ///< the checkpoint's dtype
  c10::ScalarType to = c10::ScalarType::Undefined;    ///< the module's
};

/// What a load did.
struct Report {
  std::vector<std::string> missing_keys;     ///< not strict: targets the checkpoint lacks (state_dict order)
  std::vector<std::string> unexpected_keys;  ///< not strict: checkpoint names the module lacks (sorted)
  std::vector<Conversion> converted;         ///< DtypePolicy::convert: each tensor whose dtype changed
  std::vector<std::string> tied;             ///< targets loaded from their Tie's source
  std::vector<std::filesystem::path> files;  ///< the safetensors files read
  std::size_t loaded = 0;                    ///< targets written
};

}  // namespace tracetorch::checkpoint

namespace tracetorch::detail {

[[noreturn]] inline void checkpoint_failed(const std::filesystem::path& file, const std::string& cause) {
  throw Error("tracetorch: " + file.string() + ": " + cause);
}

/// An absolute, normalised folder path without a trailing separator.
inline std::filesystem::path checkpoint_folder(const std::filesystem::path& folder) {
  auto out = std::filesystem::absolute(folder).lexically_normal();
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out;
}

/// True if `path` (absolute, normalised) lies below `folder` (checkpoint_folder's form).
inline bool checkpoint_lies_inside(const std::filesystem::path& folder, const std::filesystem::path& path) {
  const auto relative = path.lexically_relative(folder);
  return !relative.empty() && relative != "." && *relative.begin() != "..";
}

/// A checkpoint whose files are open and whose headers are validated.
struct OpenCheckpoint {
  std::filesystem::path source;                   ///< the file or index errors name
  std::vector<safetensors::Reader> readers;       ///< one per file
  std::map<std::string, std::size_t> reader_of;   ///< tensor name -> index into readers
};

/// The shard file `value` of the index entry for `tensor`, refused unless it lies in `folder`.
inline std::filesystem::path checkpoint_shard(const std::filesystem::path& index, const std::filesystem::path& folder,
                                              const std::string& tensor, const std::string& value,
                                              const checkpoint::Options& options) {
  const std::string where = "tensor " + quoted_for_message(tensor) + ": shard " + quoted_for_message(value);
  const std::filesystem::path relative(value);
  if (value.empty()) checkpoint_failed(index, where + " is an empty file name");
  // The system calls would stop at a NUL byte and open another file than the one checked.
  if (value.find('\0') != std::string::npos) checkpoint_failed(index, where + " holds a NUL byte");
  if (relative.has_root_path()) checkpoint_failed(index, where + " is an absolute path; shards lie in the index's folder");
  const auto path = (folder / relative).lexically_normal();
  if (!checkpoint_lies_inside(folder, path)) checkpoint_failed(index, where + " lies outside the checkpoint folder " + folder.string());
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) checkpoint_failed(index, where + " is missing (no file " + path.string() + ")");
  if (options.shard_links_may_leave_folder) return path;
  const auto real = std::filesystem::canonical(path, ec);
  std::error_code folder_ec;
  const auto real_folder = std::filesystem::canonical(folder, folder_ec);
  if (ec || folder_ec) checkpoint_failed(index, where + ": cannot resolve " + path.string() + ": " + (ec ? ec : folder_ec).message());
  if (!checkpoint_lies_inside(real_folder, real)) {
    checkpoint_failed(index, where + " resolves to " + real.string() + ", outside the checkpoint folder " +
                                 real_folder.string() + " (a symbolic link)");
  }
  return path;
}

/// Reads and validates `model.safetensors.index.json`, opens each shard, and checks that each
/// shard holds exactly the tensors the index puts in it.
inline OpenCheckpoint open_checkpoint_index(const std::filesystem::path& index, const checkpoint::Options& options) {
  auto [file, size] = open_for_reading(index);
  if (size > kSafetensorsMaxHeader) {
    checkpoint_failed(index, "index is " + std::to_string(size) + " bytes, over the limit of " +
                                 std::to_string(kSafetensorsMaxHeader));
  }
  std::string text(size, '\0');
  read_exactly(file.get(), index, 0, text.data(), size);
  JsonProblem problem;
  const auto json = parse_json_unique_keys(text, problem);
  if (problem.duplicate_key) checkpoint_failed(index, "index has duplicate key " + quoted_for_message(*problem.duplicate_key));
  if (!json) checkpoint_failed(index, "index is not valid JSON: " + problem.error);
  const auto* object = json->if_object();
  if (object == nullptr) checkpoint_failed(index, "index is " + json_for_message(*json) + ", not a JSON object");
  const auto* map_value = object->if_contains("weight_map");
  if (map_value == nullptr) checkpoint_failed(index, "index has no \"weight_map\"");
  const auto* weight_map = map_value->if_object();
  if (weight_map == nullptr) {
    checkpoint_failed(index, "\"weight_map\" is " + json_for_message(*map_value) + ", not an object of file names");
  }

  const auto folder = checkpoint_folder(index.has_parent_path() ? index.parent_path() : std::filesystem::path("."));
  OpenCheckpoint out{.source = index};
  std::map<std::filesystem::path, std::set<std::string>> wanted;  // shard -> the tensors the index puts there
  std::map<std::string, std::filesystem::path> shard_of;
  for (const auto& [key, value] : *weight_map) {
    const std::string tensor(key);
    const auto* name = value.if_string();
    if (name == nullptr) {
      checkpoint_failed(index, "tensor " + quoted_for_message(tensor) + ": shard is " + json_for_message(value) +
                                   ", not a file name");
    }
    const auto shard = checkpoint_shard(index, folder, tensor, std::string(*name), options);
    wanted[shard].insert(tensor);
    shard_of.emplace(tensor, shard);
  }
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

/// `missing tensor "a"; missing tensor "b"`, at most 20 names, then how many more.
inline void append_checkpoint_names(std::string& out, const std::vector<std::string>& names, const std::string& what) {
  constexpr std::size_t kMax = 20;
  for (std::size_t i = 0; i < names.size() && i < kMax; ++i) {
    out += (out.empty() ? "" : "; ") + what + " " + quoted_for_message(names[i]);
  }
  if (names.size() > kMax) out += " (and " + std::to_string(names.size() - kMax) + " more)";
}

inline checkpoint::Report load_checkpoint(torch::nn::Module& module, const OpenCheckpoint& checkpoint,
                                          const checkpoint::Options& options) {
  const auto targets = nn::state_dict(module);
  std::map<std::string, std::size_t> target_of;
  for (std::size_t i = 0; i < targets.size(); ++i) target_of.emplace(targets[i].first, i);

  std::map<std::string, std::string> tie_source;
  for (const auto& tie : options.tied) {
    const std::string what = "tie " + quoted_for_message(tie.name) + " -> " + quoted_for_message(tie.source);
    for (const auto* name : {&tie.name, &tie.source}) {
      if (target_of.count(*name) == 0) {
        checkpoint_failed(checkpoint.source, what + ": the module has no parameter or persistent buffer " +
                                                 quoted_for_message(*name));
      }
    }
    if (tie.name == tie.source) checkpoint_failed(checkpoint.source, what + " ties a tensor to itself");
    if (!tie_source.emplace(tie.name, tie.source).second) {
      checkpoint_failed(checkpoint.source, what + ": " + quoted_for_message(tie.name) + " is tied twice");
    }
  }

  checkpoint::Report report;
  for (const auto& reader : checkpoint.readers) report.files.push_back(reader.path());
  std::vector<std::pair<std::size_t, std::string>> plan;  // target index, checkpoint name
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& name = targets[i].first;
    if (checkpoint.reader_of.count(name) != 0) {
      plan.emplace_back(i, name);
    } else if (const auto tie = tie_source.find(name); tie != tie_source.end() && checkpoint.reader_of.count(tie->second) != 0) {
      plan.emplace_back(i, tie->second);
      report.tied.push_back(name);
    } else {
      report.missing_keys.push_back(name);
    }
  }
  for (const auto& [name, reader] : checkpoint.reader_of) {
    if (target_of.count(name) == 0) report.unexpected_keys.push_back(name);
  }

  for (const auto& [index, from] : plan) {
    const auto& [name, target] = targets[index];
    const auto& reader = checkpoint.readers[checkpoint.reader_of.at(from)];
    const auto& info = reader.info(from);
    const std::string tensor = "tensor " + quoted_for_message(from) + (from == name ? "" : " (tied to " + quoted_for_message(name) + ")");
    if (c10::IntArrayRef(info.shape) != target.sizes()) {
      std::ostringstream why;
      why << tensor << " has shape " << c10::IntArrayRef(info.shape) << " but the module expects " << target.sizes();
      checkpoint_failed(reader.path(), why.str());
    }
    if (info.dtype == target.scalar_type()) continue;
    if (options.dtype == checkpoint::DtypePolicy::keep) {
      checkpoint_failed(reader.path(), tensor + " is " + c10::toString(info.dtype) + " but the module's is " +
                                           c10::toString(target.scalar_type()) +
                                           " (DtypePolicy::keep: convert the module first, or load with DtypePolicy::convert)");
    }
    report.converted.push_back({name, info.dtype, target.scalar_type()});
  }

  if (options.strict && (!report.missing_keys.empty() || !report.unexpected_keys.empty())) {
    std::string why;
    append_checkpoint_names(why, report.missing_keys, "missing tensor");
    append_checkpoint_names(why, report.unexpected_keys, "unexpected tensor");
    if (!report.unexpected_keys.empty()) why += " (the module has no such parameter or persistent buffer)";
    checkpoint_failed(checkpoint.source, why);
  }

  // Everything is read before anything is written: a read that fails leaves the module as it was.
  std::map<std::string, torch::Tensor> staged;
  for (const auto& [index, from] : plan) {
    if (staged.count(from) == 0) staged.emplace(from, checkpoint.readers[checkpoint.reader_of.at(from)].load(from));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [index, from] : plan) {
    torch::Tensor target = targets[index].second;
    target.copy_(staged.at(from));
  }
  report.loaded = plan.size();
  return report;
}

}  // namespace tracetorch::detail

namespace tracetorch::checkpoint {

/// Loads the checkpoint at `path` (a folder, a `.safetensors` file or an index `.json`) into
/// `module` by name, as the file comment says; throws tracetorch::Error and changes nothing on any
/// refusal.
inline Report load(torch::nn::Module& module, const std::filesystem::path& path, const Options& options = {}) {
  return detail::load_checkpoint(module, detail::open_checkpoint(path, options), options);
}

}  // namespace tracetorch::checkpoint
