#pragma once
/// \file
/// What a checkpoint load is asked (checkpoint::Options) and what it reports (checkpoint::Report),
/// documented in tracetorch/checkpoint.hpp; here so that the loading steps beside this file can use
/// them without including a public header. Also the one way a load refuses: checkpoint_failed.

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "tracetorch/error.hpp"

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

/// Every refusal of a load: "tracetorch: <file>: <cause>".
[[noreturn]] inline void checkpoint_failed(const std::filesystem::path& file, const std::string& cause) {
  throw Error("tracetorch: " + file.string() + ": " + cause);
}

}  // namespace tracetorch::detail
