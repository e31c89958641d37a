#pragma once
/// \file
/// Gives a staged trace its place in debug_path: the whole staging directory in one exchange
/// (publish.hpp) where debug_path can be replaced, else file by file under debug_path's lock.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/debugger/spare_files.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/directory_lock.hpp"
#include "tracetorch/detail/fs/fault_injection.hpp"
#include "tracetorch/detail/fs/publish.hpp"

namespace tracetorch::detail {

/// The longest a trace waits for debug_path's lock: readers (tracetorch-diff) hold it while they
/// read, which takes long for a large trace.
inline constexpr std::chrono::milliseconds kTraceLockTimeout{10 * 60 * 1000};

/// What a session remembers about publishing into its debug_path.
struct PublishState {
  std::filesystem::path debug_path;  // as the user named it (messages)
  std::filesystem::path target;      // its canonical form (a symbolic link to a directory: that directory)
  bool keep_spares = false;          // reuse_previous_files
  std::vector<std::string> not_spares;  // replaced files never kept (the JSON files with use_repr=false)
  // The new trace's hard links to its repeated tensors, for the publish in progress: the replaced
  // files of those names are not kept either (see keep_or_drop_spares).
  std::vector<const char*> linked;
  bool exchange_refused = false;     // the filesystem refused RENAME_EXCHANGE: file by file from now on
  bool leftovers_removed = false;    // abandoned staging directories inside debug_path removed once
};

namespace trace_publish_detail {

/// True where debug_path can be replaced by an exchange with a sibling: not the root, not a
/// mount point, not this process's working directory (an exchange would leave the process in the
/// replaced tree). The filesystem's own refusal is learnt from the first exchange.
inline bool can_replace_whole(const std::filesystem::path& target) {
  if (!target.has_parent_path() || target.parent_path() == target) return false;
  struct stat tree {}, parent {}, cwd {};
  if (::stat(target.c_str(), &tree) != 0 || ::stat(target.parent_path().c_str(), &parent) != 0) return false;
  if (tree.st_dev != parent.st_dev) return false;
  return !(::stat(".", &cwd) == 0 && publish_detail::same_inode(cwd, tree));
}

/// Removes `names` from the directory open at `fd` (absent names are fine).
inline void remove_names(int fd, const std::vector<std::string>& names) {
  for (const auto& name : names) ::unlinkat(fd, name.c_str(), 0);
}

inline bool is_empty(int fd) { return publish_detail::entries_of(fd).empty(); }

/// After a trace took its place: `staging` holds what it replaced. Kept as spares (inside
/// debug_path, under its own name) where asked and there is something to keep; else removed.
inline void keep_or_drop_spares(std::unique_ptr<TraceStaging>& staging, const PublishState& state) {
  if (!state.keep_spares) return staging.reset();
  remove_names(staging->fd(), state.not_spares);
  // Where the replaced trace had a link at a name that is a link in the new one too (a forward
  // repeats the one before), the spare it linked to keeps one name and can be written over next
  // time, instead of removed and made again; and the next link needs no removal first.
  for (const char* name : state.linked) ::unlinkat(staging->fd(), name, 0);
  if (is_empty(staging->fd())) return staging.reset();
  if (staging->inside(state.target)) return;
  if (injected_fault("move in") || !staging->directory().move_to(state.target / staging->name())) staging.reset();
}

/// One renameat2 between the directories open at `from` and `to` (the same name in both).
inline int rename_between(int from, int to, const std::string& name, unsigned flags) {
  return publish_detail::rename_at(from, name.c_str(), to, name.c_str(), flags);
}

struct Placed {
  const std::string* name;
  bool exchanged;  // the previous file of that name is in the staging directory now
};

/// Undoes `placed`, last first; false where a step failed.
inline bool restore(int staging, int tree, const std::vector<Placed>& placed) {
  bool restored = true;
  for (auto it = placed.rbegin(); it != placed.rend(); ++it) {
    const unsigned flags = it->exchanged ? publish_detail::kRenameExchange : publish_detail::kRenameNoReplace;
    if (injected_fault("restore") || rename_between(tree, staging, *it->name, flags) != 0) restored = false;
  }
  return restored;
}

/// Moves the file `name` from `staging` to `tree`, exchanging it with a regular file there (the
/// previous version stays in `staging`); -1 with errno on failure, else 1 (exchanged) or 0.
inline int place_file(int staging, int tree, const std::string& name) {
  if (injected_fault("place")) return -1;
  return publish_detail::exchange_or_rename_at(staging, name.c_str(), tree, name.c_str());
}

}  // namespace trace_publish_detail

/// The weaker way, where debug_path cannot be exchanged whole: under debug_path's exclusive lock
/// (readers holding the shared lock see the previous trace or the new one), each file of `names`
/// (the JSON files last) takes its name in one step. Where one fails, those placed before are
/// put back, and tracetorch::Error names the file. A process killed meanwhile leaves some files
/// new and some old, each whole.
inline void place_file_by_file(std::unique_ptr<TraceStaging>& staging, const PublishState& state,
                               const std::vector<std::string>& names) {
  namespace tp = trace_publish_detail;
  const DirectoryLock lock(state.target, LockMode::exclusive, kTraceLockTimeout);
  std::vector<tp::Placed> placed;
  placed.reserve(names.size());
  for (const auto& name : names) {
    const int how = tp::place_file(staging->fd(), lock.fd(), name);
    if (how < 0) {
      const std::string cause = std::strerror(errno);
      const bool restored = tp::restore(staging->fd(), lock.fd(), placed);
      throw Error("tracetorch: cannot write " + (state.debug_path / name).string() + ": " + cause +
                  (restored ? "; " + state.debug_path.string() + " holds the previous trace, unchanged"
                            : "; putting the previous files back failed too: " + state.debug_path.string() +
                                  " holds some files of the new trace"));
    }
    placed.push_back({&name, how == 1});
  }
  tp::keep_or_drop_spares(staging, state);
}

/// Publishes the trace staged in `staging` (exactly the files of `names`, JSON last) into
/// debug_path: where it can be replaced whole, in one exchange (publish()), else file by file.
/// `staging` becomes the spares to keep, or null. tracetorch::Error where it fails, with
/// debug_path as it was (or, past the exchange, with the new trace whole and the message saying
/// what is left where).
inline void publish_trace(std::unique_ptr<TraceStaging>& staging, PublishState& state, const std::vector<std::string>& names) {
  namespace tp = trace_publish_detail;
  if (!state.leftovers_removed) {
    remove_abandoned_inside(state.target, kSparesPrefix);
    state.leftovers_removed = true;
  }
  if (!state.exchange_refused && tp::can_replace_whole(state.target) && staging->directory().move_beside_target()) {
    try {
      auto replaced = publish(std::move(staging->directory()), keep_every_entry,
                              {.lock_timeout = kTraceLockTimeout, .sync_directories = false});
      if (!replaced) return staging.reset();  // debug_path was removed meanwhile: nothing replaced
      staging->adopt(std::move(*replaced));
      return tp::keep_or_drop_spares(staging, state);
    } catch (const CannotExchange&) {
      state.exchange_refused = true;
      // Links to carried-over entries may be in it now: it must hold the trace's files only.
      publish_detail::remove_entries_except(staging->fd(), names);
    }
  }
  place_file_by_file(staging, state, names);
}

}  // namespace tracetorch::detail
