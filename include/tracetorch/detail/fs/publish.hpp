#pragma once
/// \file
/// publish(): gives a StagedDirectory its target's name in one step (renameat2 RENAME_EXCHANGE),
/// carrying over the entries it keeps and removing abandoned staging directories first.

// Replaces a directory whole (issue 26, item 1): a trace is written into a fresh sibling of its
// debug_path, which then takes debug_path's place in one step. Linux only; no LibTorch.
// docs/reliability.md ("A trace is replaced whole") states the promises and the tests that prove them.
//
//   detail::StagedDirectory staged("dbg");                        // dbg/../.dbg.tracetorch-staging-<pid>-<random>
//   write_files_into(staged.path());
//   auto replaced = detail::publish(std::move(staged));           // dbg is now the new tree
//   // `replaced`: the previous tree minus what was carried over; removed when it is destroyed.
//
// Protocol, for every process and thread that uses it:
// - A tree is changed only by exchange, and only by the holder of an exclusive flock on the
//   directory inode it replaces (DirectoryLock). The path names another inode after each
//   exchange, so a lock is taken by polling: open, flock(LOCK_NB), then check that the path
//   still names the locked inode; otherwise retry on the inode it names now.
// - Every staging directory is flocked by its creator from mkdir to its end; the replaced tree,
//   which takes the staging name, stays flocked by the publisher. A staging directory that can
//   be flocked without waiting is abandoned (its creator died) and the next publish into the
//   same parent removes it, after putting back the entries it was carrying (see publish()).
// - Readers take a shared DirectoryLock on the tree while they read it: no exchange happens
//   meanwhile, so they read the old tree or the new one, whole.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/directory_at.hpp"
#include "tracetorch/detail/fs/directory_lock.hpp"
#include "tracetorch/detail/fs/fault_injection.hpp"
#include "tracetorch/detail/fs/staged_directory.hpp"

namespace tracetorch::detail {

// CarryOver (staged_directory.hpp): which entries of the replaced tree the new one keeps, asked
// for each name that the staged tree does not have (a name the staged tree has is always the staged one).

/// Keeps every entry the new tree does not replace by name: the debugger's behaviour before
/// publish, where a file of the previous trace that the new one lacks stays.
inline bool keep_every_entry(std::string_view) { return true; }

struct PublishOptions {
  /// The longest wait for the lock on the target (DirectoryLock).
  std::chrono::milliseconds lock_timeout = DirectoryLock::kDefaultTimeout;
  /// fsync the staged directory before the exchange and the parent after it (the names, not the
  /// files' data: that is the writer's to sync where power loss matters).
  bool sync_directories = true;
};

namespace publish_detail {

/// Opens and exclusively flocks the staging directory `name` of `parent` where its creator is
/// gone (no one holds its flock) and it is still at that name; an empty UniqueFd otherwise.
inline UniqueFd lock_abandoned(int parent, const std::string& name) {
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat locked {}, named {};
  if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return UniqueFd();  // its writer is alive
  if (::fstat(fd.get(), &locked) != 0 || ::fstatat(parent, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      !same_inode(locked, named)) {
    return UniqueFd();  // removed by another publish meanwhile
  }
  return fd;
}

/// Moves each entry of the abandoned directory `abandoned` that is neither a regular file nor a
/// symbolic link and that `carry_over` keeps into `staged` where neither `staged` nor the target
/// (`target_fd`, -1: none) has that name. False where such an entry could not be moved.
inline bool put_back_entries(int abandoned, int staged, int target_fd, const CarryOver& carry_over) {
  bool all_moved = true;
  for (const auto& entry : entries_of(abandoned)) {
    struct stat info {};
    if (::fstatat(abandoned, entry.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || S_ISREG(info.st_mode) ||
        S_ISLNK(info.st_mode) || !carry_over(entry)) {
      continue;
    }
    if (exists_at(staged, entry.c_str()) || (target_fd >= 0 && exists_at(target_fd, entry.c_str())) ||
        rename_at(abandoned, entry.c_str(), staged, entry.c_str(), kRenameNoReplace) != 0) {
      all_moved = false;
    }
  }
  return all_moved;
}

}  // namespace publish_detail

/// Removes the abandoned staging directories of `staged`'s target (no one holds their flock):
/// first every entry in them that is neither a regular file nor a symbolic link and that
/// `carry_over` keeps is moved into `staged` where neither it nor the target (`target_fd`, -1:
/// none) has that name. Those can only be entries of the target that a killed publish was moving
/// (a trace stages files only). A directory where such a move fails is kept, renamed
/// `.<name>.tracetorch-kept-<random>`, never removed: where that rename fails too, it stays
/// at its staging name, for the next publish to try again.
inline void remove_abandoned_staging(StagedDirectory& staged, int target_fd, const CarryOver& carry_over) {
  namespace pd = publish_detail;
  const auto parent = staged.target().parent_path();
  const std::string prefix = pd::staging_prefix(staged.target().filename().string());
  pd::UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd) return;  // best effort: the publish itself reports what matters
  const std::string mine = staged.path().filename().string();
  for (const auto& name : pd::entries_of(parent_fd.get())) {
    if (name == mine || !pd::is_staging_name(name, prefix)) continue;
    const pd::UniqueFd fd = pd::lock_abandoned(parent_fd.get(), name);
    if (!fd) continue;
    if (!pd::put_back_entries(fd.get(), staged.fd(), target_fd, carry_over)) {
      const std::string kept = pd::kept_name(staged.target().filename().string());
      if (!injected_fault("keep")) ::renameat(parent_fd.get(), name.c_str(), parent_fd.get(), kept.c_str());
      continue;  // kept or left: it holds an entry of the target's
    }
    pd::remove_locked_tree(parent_fd.get(), name, fd.get());
  }
}

/// Removes the directories `<prefix><pid>-<16 hex>` in `directory` whose creator is gone (no one
/// holds their flock): staging directories made inside a target (StagedDirectory's second
/// constructor), which hold only what their creator wrote. Best effort: what cannot be read or
/// removed stays.
inline void remove_abandoned_inside(const std::filesystem::path& directory, std::string_view prefix) {
  namespace pd = publish_detail;
  pd::UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return;
  for (const auto& name : pd::entries_of(fd.get())) {
    if (!pd::is_staging_name(name, prefix)) continue;
    const pd::UniqueFd abandoned = pd::lock_abandoned(fd.get(), name);
    if (abandoned) pd::remove_locked_tree(fd.get(), name, abandoned.get());
  }
}

namespace publish_detail {

/// The steps of publish_once(), in order.

/// Where the target does not exist yet: removes abandoned staging directories and renames
/// `staged` to the target with a rename that refuses to replace whatever another writer put
/// there. False where one did (EEXIST: retry, now with a lock and an exchange).
inline bool rename_first_tree(StagedDirectory& staged, const CarryOver& carry_over, bool sync) {
  const auto& target = staged.target();
  remove_abandoned_staging(staged, -1, carry_over);
  if (sync) ::fsync(staged.fd());
  if (rename_at(AT_FDCWD, staged.path().c_str(), AT_FDCWD, target.c_str(), kRenameNoReplace) != 0) {
    if (errno == EEXIST) return false;
    fail("cannot rename " + staged.path().string() + " to", target, errno);
  }
  if (sync) sync_directory(target.parent_path());
  return true;
}

/// CannotExchange where the locked tree `old_tree` at `target` is a mount point or this
/// process's working directory.
inline void check_exchangeable(const std::filesystem::path& target, const struct stat& old_tree) {
  const auto parent = target.parent_path();
  struct stat parent_info {}, cwd {};
  if (::stat(parent.c_str(), &parent_info) != 0) fail("cannot read", parent, errno);
  if (parent_info.st_dev != old_tree.st_dev) {
    throw CannotExchange("tracetorch: cannot publish into " + target.string() + ": it is a mount point");
  }
  if (::stat(".", &cwd) == 0 && same_inode(cwd, old_tree)) {
    throw CannotExchange("tracetorch: cannot publish into " + target.string() +
                         ": it is this process's working directory, which an exchange would leave in the replaced tree");
  }
}

/// Name -> the entry of the current tree linked or copied into the staged one.
using Carried = std::unordered_map<std::string, struct stat>;

/// The refusal of a publish that would replace the directory `name` of the target by the
/// staged entry of that name (with what it holds: the user's, never the publisher's to remove).
[[noreturn]] inline void refuse_replacing_directory(const std::filesystem::path& target, const std::string& name) {
  throw Error("tracetorch: cannot publish into " + target.string() + ": " + (target / name).string() +
              " is a directory, and the new tree has a file of that name; a directory is never replaced: move it away. " +
              target.string() + " is unchanged");
}

/// Carries over, before the exchange, each entry of the current tree (`from`, at `target`) that
/// `carry_over` keeps and the staged tree (`to`) lacks: a hard link (a copy where links fail).
/// Directories, and other entries that cannot be linked, are moved after the exchange. A
/// directory at a name the staged tree has is refused (refuse_replacing_directory).
inline Carried link_carried_entries(int from, int to, const std::filesystem::path& target, const CarryOver& carry_over) {
  // The staged tree is this publisher's alone: its names are read once, and readdir's d_type
  // spares an fstatat per replaced entry (a trace replaces about all of them, each forward).
  const std::vector<std::string> staged_names = entries_of(to);
  const std::unordered_set<std::string_view> staged(staged_names.begin(), staged_names.end());
  Carried carried;
  for (const auto& entry : typed_entries_of(from)) {
    const std::string& name = entry.name;
    if (staged.contains(name)) {
      if (is_directory_entry(from, entry)) refuse_replacing_directory(target, name);
      continue;
    }
    struct stat info {};
    if (!carry_over(name) || ::fstatat(from, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(info.st_mode)) continue;
    if (!injected_fault("link") && ::linkat(from, name.c_str(), to, name.c_str(), 0) == 0) {
      carried.emplace(name, info);
      continue;
    }
    const int link_error = errno;
    if (link_error == ENOENT) continue;  // removed meanwhile
    std::string copy_failure;
    const bool copied = injected_fault("link") ? (copy_failure = std::generic_category().message(errno), false)
                        : S_ISREG(info.st_mode)   ? copy_file_at(from, to, name.c_str(), copy_failure)
                        : S_ISLNK(info.st_mode) ? copy_symlink_at(from, to, name.c_str(), copy_failure)
                                                : false;
    if (copied) {
      carried.emplace(name, info);
    } else if (S_ISREG(info.st_mode) || S_ISLNK(info.st_mode)) {
      throw Error("tracetorch: cannot keep " + (target / name).string() + " in the new tree (link: " +
                  std::generic_category().message(link_error) + ", copy: " + copy_failure + "); " + target.string() +
                  " is unchanged");
    }
  }
  return carried;
}

/// Exchanges `staged` with its target. False where the target was removed meanwhile (by someone
/// who does not lock: retry); CannotExchange where the filesystem refuses the exchange.
inline bool exchange_with_target(const StagedDirectory& staged) {
  const auto& target = staged.target();
  if (!injected_fault("exchange") &&
      rename_at(AT_FDCWD, staged.path().c_str(), AT_FDCWD, target.c_str(), kRenameExchange) == 0) {
    return true;
  }
  const int error = errno;
  if (error == EINVAL || error == ENOSYS || error == EXDEV || error == EBUSY || error == ENOTSUP) {
    throw CannotExchange("tracetorch: cannot publish into " + target.string() +
                         ": exchanging it with its staging directory failed: " + std::generic_category().message(error));
  }
  if (error == ENOENT) return false;  // removed by someone who does not lock
  fail("cannot exchange " + staged.path().string() + " with", target, error);
}

/// After the exchange: what the replaced tree still holds that the new tree (`new_tree`) keeps
/// (directories, entries made or replaced after they were linked) moves over; the links it
/// shares with the new tree go, so that it holds only what the new tree replaced or refused.
/// Returns the first failure ("<path>: <cause>"), empty where none.
inline std::string move_over_kept_entries(const StagedDirectory& replaced, int new_tree, const Carried& carried,
                                          const CarryOver& carry_over) {
  std::string failed;
  try {
    // Read once: what this loop moves into the new tree has names of its own.
    const std::vector<std::string> new_names = entries_of(new_tree);
    const std::unordered_set<std::string_view> in_new_tree(new_names.begin(), new_names.end());
    for (const auto& entry : typed_entries_of(replaced.fd())) {
      const std::string& name = entry.name;
      if (!carry_over(name)) continue;
      const auto found = carried.find(name);
      int moved = 0;
      if (found != carried.end()) {
        struct stat now {};
        if (::fstatat(replaced.fd(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) continue;
        moved = injected_fault("move over") ? -1
                : same_inode(found->second, now)
                    ? ::unlinkat(replaced.fd(), name.c_str(), 0)
                    : ::renameat(replaced.fd(), name.c_str(), new_tree, name.c_str());  // newer than the one kept
      } else if (!in_new_tree.contains(name)) {
        moved = injected_fault("move over") ? -1 : rename_at(replaced.fd(), name.c_str(), new_tree, name.c_str(), kRenameNoReplace);
      } else if (failed.empty() && is_directory_entry(replaced.fd(), entry)) {  // made at a staged file's name after link_carried_entries
        failed = name + " is a directory, and the new tree has a file of that name";
        continue;
      }
      if (moved != 0 && errno != ENOENT && failed.empty()) {
        failed = (replaced.path() / name).string() + ": " + std::generic_category().message(errno);
      }
    }
  } catch (const std::exception& error) {  // from carry_over, or out of memory
    failed = error.what();
  }
  return failed;
}

/// Renames the replaced tree to a kept name (it holds an entry the new tree should have);
/// returns where it is now (its staging name where the rename failed).
inline std::filesystem::path keep_replaced_tree(const StagedDirectory& replaced) {
  const auto kept = replaced.target().parent_path() / kept_name(replaced.target().filename().string());
  std::error_code ec;
  std::filesystem::rename(replaced.path(), kept, ec);
  return ec ? replaced.path() : kept;
}

}  // namespace publish_detail

/// One attempt of publish(); `retry` is set where the target appeared or changed meanwhile.
inline std::optional<StagedDirectory> publish_once(StagedDirectory& staged, const CarryOver& carry_over, bool sync,
                                                   std::chrono::milliseconds timeout, bool& retry) {
  namespace pd = publish_detail;
  retry = false;
  const auto& target = staged.target_;
  auto lock = DirectoryLock::if_exists(target, LockMode::exclusive, timeout);
  if (!lock) {  // a first tree
    if (!pd::rename_first_tree(staged, carry_over, sync)) return retry = true, std::nullopt;
    staged.fd_.reset();  // published: unlocked, and no longer removed on destruction
    return std::nullopt;
  }
  pd::check_exchangeable(target, lock->identity());
  remove_abandoned_staging(staged, lock->fd(), carry_over);
  const pd::Carried carried = pd::link_carried_entries(lock->fd(), staged.fd(), target, carry_over);
  ::fchmod(staged.fd(), lock->identity().st_mode & 07777);
  if (sync) ::fsync(staged.fd());
  if (!pd::exchange_with_target(staged)) return retry = true, std::nullopt;

  // The replaced tree is at the staging name now, and from here on never removed by accident:
  // it may hold directories of the target's that are not moved back yet.
  const pd::UniqueFd new_tree(staged.fd_.release());  // locked until the moves are done
  StagedDirectory replaced(target, staged.path_, std::move(*lock));
  const std::string failed = pd::move_over_kept_entries(replaced, new_tree.get(), carried, carry_over);
  if (sync) pd::sync_directory(target.parent_path());  // after the moves: the user's directories are away only briefly
  if (!failed.empty()) {
    const auto kept = pd::keep_replaced_tree(replaced);
    replaced.fd_.reset();  // never removed: it holds an entry the new tree should have
    throw Error("tracetorch: published " + target.string() + ", but could not move an entry of the replaced tree into it: " +
                failed + "; the replaced tree is kept as " + kept.string());
  }
  return replaced;
}

/// Gives `staged` its target's name in one step, replacing the tree there, under the target's
/// exclusive lock. Before the exchange, every entry of the current tree that `carry_over` keeps
/// and `staged` does not have is hard-linked (copied where links fail) into `staged`;
/// directories are moved over right after it. Abandoned staging directories of the same target
/// are removed first. Where the target does not exist yet, a rename that refuses to replace
/// (two first publishes: the second locks and exchanges). Returns the replaced tree, at a
/// staging name and locked: what the new tree replaced by name or refused to carry over; it is
/// removed when destroyed (or kept, for reuse of its files). tracetorch::Error naming the path
/// that failed; CannotExchange where an exchange is impossible there (nothing changed). `staged`
/// is spent only where the publish succeeds: after an exception it is still the caller's, at
/// the staging name beside the target (where it may hold links to carried-over entries).
inline std::optional<StagedDirectory> publish(StagedDirectory&& staged, const CarryOver& carry_over = keep_every_entry,
                                              const PublishOptions& options = {}) {
  if (!staged.fd()) throw Error("tracetorch: publish: the staged directory was published or discarded already");
  for (int attempt = 0; attempt < 1000; ++attempt) {
    bool retry = false;
    auto replaced = publish_once(staged, carry_over, options.sync_directories, options.lock_timeout, retry);
    if (!retry) return replaced;
  }
  throw Error("tracetorch: cannot publish into " + staged.target().string() + ": it kept changing (1000 attempts)");
}

}  // namespace tracetorch::detail
