#pragma once
/// \file
/// The directory operations publishing is made of, each relative to a directory's descriptor,
/// each written here only: renameat2 (exchange, no-replace), exchange-else-rename, the name of a
/// file set aside, an entry's existence, a directory's names and the removal of the entries not
/// kept, fsync of a
/// directory, the copy of a file or a symbolic link from one directory to another where a hard
/// link fails, and the removal of a tree through its descriptor. Linux only; no LibTorch.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tracetorch/detail/fs/directory_lock.hpp"  // UniqueFd

namespace tracetorch::detail {

namespace publish_detail {

inline constexpr unsigned kRenameNoReplace = 1;  // RENAME_NOREPLACE, <linux/fs.h>
inline constexpr unsigned kRenameExchange = 2;   // RENAME_EXCHANGE

/// renameat2 by its system call: glibc has a wrapper only from 2.28.
inline int rename_at(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  return static_cast<int>(::syscall(SYS_renameat2, from_dir, from, to_dir, to, flags));
}

/// Gives `from` (in `from_dir`) the name `to` (in `to_dir`) in one step. Where `to` is a regular
/// file the two are exchanged (RENAME_EXCHANGE): the replaced file then has the name `from`, for
/// the caller to keep or remove, and 1 is returned. Elsewhere (nothing there yet, a filesystem or
/// kernel without exchange) a plain rename: 0. -1 with errno on failure.
inline int exchange_or_rename_at(int from_dir, const char* from, int to_dir, const char* to) {
  struct stat existing {};
  if (::fstatat(to_dir, to, &existing, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(existing.st_mode)) {
    if (rename_at(from_dir, from, to_dir, to, kRenameExchange) == 0) return 1;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOENT) return -1;  // ENOENT: it went meanwhile
  }
  return ::renameat(from_dir, from, to_dir, to) == 0 ? 0 : -1;
}

/// The name a staged file is set aside under when a later file takes its name: number `n`.
inline constexpr std::size_t kAsideNameSize = 40;
inline const char* aside_name(unsigned n, char (&buffer)[kAsideNameSize]) noexcept {
  std::snprintf(buffer, kAsideNameSize, ".tracetorch-aside-%u", n);
  return buffer;
}

inline bool exists_at(int dir, const char* name) {
  struct stat info {};
  return ::fstatat(dir, name, &info, AT_SYMLINK_NOFOLLOW) == 0;
}

/// An entry of a directory as readdir gives it: `type` is its d_type, DT_UNKNOWN where the
/// filesystem does not say.
struct DirectoryEntry {
  std::string name;
  unsigned char type;
};

/// The entries of the directory open at `dir` (without "." and ".."); empty if it cannot be read.
/// Read with getdents64 on `dir` itself, rewound first: a publish reads several directories per
/// forward, and opendir's copy of the descriptor cost three more system calls each time.
inline std::vector<DirectoryEntry> typed_entries_of(int dir) {
  std::vector<DirectoryEntry> entries;
  if (::lseek(dir, 0, SEEK_SET) != 0) return entries;
  alignas(dirent64) char buffer[16 * 1024];
  for (ssize_t got; (got = ::getdents64(dir, buffer, sizeof buffer)) > 0;) {
    for (ssize_t at = 0; at < got;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      at += entry->d_reclen;
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") entries.push_back({std::string(name), entry->d_type});
    }
  }
  return entries;
}

/// The names in the directory open at `dir` (without "." and ".."); empty if it cannot be read.
inline std::vector<std::string> entries_of(int dir) {
  std::vector<std::string> names;
  for (auto& entry : typed_entries_of(dir)) names.push_back(std::move(entry.name));
  return names;
}

/// True where `entry` of the directory open at `dir` is a directory: its d_type says, or (where
/// the filesystem does not fill d_type) an fstatat, which is false for an entry gone meanwhile.
inline bool is_directory_entry(int dir, const DirectoryEntry& entry) {
  if (entry.type != DT_UNKNOWN) return entry.type == DT_DIR;
  struct stat info {};
  return ::fstatat(dir, entry.name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode);
}

/// Removes every entry of the directory open at `dir` whose name is not one of `kept`.
template <class Names>
void remove_entries_except(int dir, const Names& kept) {
  const std::set<std::string_view> wanted(kept.begin(), kept.end());
  for (const auto& entry : entries_of(dir)) {
    if (!wanted.contains(entry)) ::unlinkat(dir, entry.c_str(), 0);
  }
}

inline void sync_directory(const std::filesystem::path& directory) {
  const UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

/// Copies the regular file `name` of `from` into `to` (same name and permission bits); false with
/// `failure` saying why. Opened without blocking and checked to be a regular file: an entry
/// replaced by a FIFO since the caller looked would otherwise block the open until a writer came.
inline bool copy_file_at(int from, int to, const char* name, std::string& failure) {
  const auto failed = [&](int error) {
    failure = std::generic_category().message(error);
    return false;
  };
  UniqueFd in(::openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat info {};
  if (!in || ::fstat(in.get(), &info) != 0) return failed(errno);
  if (!S_ISREG(info.st_mode)) return failure = "it is no longer a regular file", false;
  UniqueFd out(::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, info.st_mode & 07777));
  if (!out) return failed(errno);
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(in.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return true;
    if (got < 0) break;
    for (ssize_t done = 0; done < got;) {
      const ssize_t put = ::write(out.get(), buffer + done, static_cast<std::size_t>(got - done));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        const int error = put < 0 ? errno : ENOSPC;
        ::unlinkat(to, name, 0);
        return failed(error);
      }
      done += put;
    }
  }
  const int error = errno;
  ::unlinkat(to, name, 0);
  return failed(error);
}

/// A copy of the symbolic link `name` of `from` in `to`; false with `failure` saying why.
inline bool copy_symlink_at(int from, int to, const char* name, std::string& failure) {
  std::string target(4096, '\0');
  const ssize_t size = ::readlinkat(from, name, target.data(), target.size());
  if (size < 0) return failure = std::generic_category().message(errno), false;
  if (static_cast<std::size_t>(size) == target.size()) return failure = std::generic_category().message(ENAMETOOLONG), false;
  target.resize(static_cast<std::size_t>(size));
  if (::symlinkat(target.c_str(), to, name) != 0) return failure = std::generic_category().message(errno), false;
  return true;
}

/// Removes what the directory open at `dir` holds, through descriptors: entries are unlinked
/// relative to it, subdirectories (opened without following a link) emptied the same way first,
/// at most kMaxDepth levels down. False where something stays.
inline bool remove_contents_at(int dir, int depth = 0) {
  constexpr int kMaxDepth = 64;  // a staging directory is flat; a deeper tree is left, not recursed into
  bool all_removed = true;
  for (const auto& entry : entries_of(dir)) {
    if (::unlinkat(dir, entry.c_str(), 0) == 0 || errno == ENOENT) continue;
    const UniqueFd sub(::openat(dir, entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub || depth >= kMaxDepth || !remove_contents_at(sub.get(), depth + 1) ||
        ::unlinkat(dir, entry.c_str(), AT_REMOVEDIR) != 0) {
      all_removed = false;
    }
  }
  return all_removed;
}

/// Removes the abandoned directory `name` of `parent`, which `fd` holds open and flocked: its
/// contents through `fd`, then the name with rmdir where it still names that directory. Nothing
/// but what that directory holds is removed, whatever the name comes to mean meanwhile (rmdir
/// refuses a directory that is not empty).
inline void remove_locked_tree(int parent, const std::string& name, int fd) {
  if (!remove_contents_at(fd)) return;
  struct stat locked {}, named {};
  if (::fstat(fd, &locked) == 0 && ::fstatat(parent, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 && same_inode(locked, named)) {
    ::unlinkat(parent, name.c_str(), AT_REMOVEDIR);
  }
}

}  // namespace publish_detail

}  // namespace tracetorch::detail
