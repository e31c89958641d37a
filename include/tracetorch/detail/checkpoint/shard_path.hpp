#pragma once
/// \file
/// Where an index's shard may lie: a relative name that stays in the index's folder, also after
/// symbolic links are followed (unless Options::shard_links_may_leave_folder).

#include <filesystem>
#include <string>
#include <system_error>

#include "tracetorch/checkpoint/options.hpp"
#include "tracetorch/detail/text/message_text.hpp"

namespace tracetorch::detail {

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

}  // namespace tracetorch::detail
