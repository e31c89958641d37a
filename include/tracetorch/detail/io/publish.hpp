#pragma once
/// \file
/// Replaces a directory whole (issue 26, item 1): a trace is written into a fresh sibling of its
/// debug_path, which then takes debug_path's place in one step (renameat2 RENAME_EXCHANGE).
/// Linux only; no LibTorch. docs/publish-draft.md states the promises and the tests that prove them.
///
/// \code
/// detail::StagedDirectory staged("dbg");                        // dbg/../.dbg.tracetorch-staging-<pid>-<random>
/// write_files_into(staged.path());
/// auto replaced = detail::publish(std::move(staged));           // dbg is now the new tree
/// // `replaced`: the previous tree minus what was carried over; removed when it is destroyed.
/// \endcode
///
/// Protocol, for every process and thread that uses it:
/// - A tree is changed only by exchange, and only by the holder of an exclusive flock on the
///   directory inode it replaces (DirectoryLock). The path names another inode after each
///   exchange, so a lock is taken by polling: open, flock(LOCK_NB), then check that the path
///   still names the locked inode; otherwise retry on the inode it names now.
/// - Every staging directory is flocked by its creator from mkdir to its end; the replaced tree,
///   which takes the staging name, stays flocked by the publisher. A staging directory that can
///   be flocked without waiting is abandoned (its creator died) and the next publish into the
///   same parent removes it, after putting back the entries it was carrying (see publish()).
/// - Readers take a shared DirectoryLock on the tree while they read it: no exchange happens
///   meanwhile, so they read the old tree or the new one, whole.

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracetorch/detail/error.hpp"

namespace tracetorch::detail {

/// The directory cannot be replaced by an exchange (a mount point, the root, this process's
/// working directory, a filesystem without RENAME_EXCHANGE); nothing was changed. A caller can
/// fall back to placing files one by one.
class CannotExchange : public Error {
 public:
  using Error::Error;
};

class StagedDirectory;
using CarryOver = std::function<bool(std::string_view name)>;
std::optional<StagedDirectory> publish_once(StagedDirectory&, const CarryOver&, bool, std::chrono::milliseconds, bool&);

namespace publish_detail {

[[noreturn]] inline void fail(const std::string& what, const std::filesystem::path& path, int error) {
  throw Error("tracetorch: " + what + " " + path.string() + ": " + std::generic_category().message(error));
}

/// An owned file descriptor.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_;
};

inline constexpr unsigned kRenameNoReplace = 1;  // RENAME_NOREPLACE, <linux/fs.h>
inline constexpr unsigned kRenameExchange = 2;   // RENAME_EXCHANGE

/// renameat2 by its system call: glibc has a wrapper only from 2.28.
inline int rename_at(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  return static_cast<int>(::syscall(SYS_renameat2, from_dir, from, to_dir, to, flags));
}

inline bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

inline bool exists_at(int dir, const char* name) {
  struct stat info {};
  return ::fstatat(dir, name, &info, AT_SYMLINK_NOFOLLOW) == 0;
}

/// The names in the directory open at `dir` (without "." and ".."); empty if it cannot be read.
inline std::vector<std::string> entries_of(int dir) {
  std::vector<std::string> names;
  const int copy = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);  // closedir closes the descriptor it reads
  if (copy < 0) return names;
  DIR* stream = ::fdopendir(copy);
  if (stream == nullptr) {
    ::close(copy);
    return names;
  }
  ::rewinddir(stream);
  while (const dirent* entry = ::readdir(stream)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(stream);
  return names;
}

inline void sync_directory(const std::filesystem::path& directory) {
  const UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

/// 16 hex digits from getrandom (std::random_device where that fails).
inline std::string random_hex() {
  std::uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    std::random_device device;
    value = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

/// `.<name>.tracetorch-staging-`: the start of every staging name of the target `name`. A long
/// name is shortened (kept apart from others by its hash) so that the staging name fits NAME_MAX.
inline std::string staging_prefix(const std::string& name) {
  if (name.size() <= 180) return "." + name + ".tracetorch-staging-";
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return "." + name.substr(0, 100) + "~" + text + ".tracetorch-staging-";
}

/// True for `<prefix><pid>-<16 hex digits>`, the names StagedDirectory makes.
inline bool is_staging_name(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return false;
  name.remove_prefix(prefix.size());
  const auto dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || name.size() - dash - 1 != 16) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = i < dash ? (c >= '0' && c <= '9') : i == dash || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!ok) return false;
  }
  return true;
}

/// The target as an absolute path without "." or ".." parts or a trailing separator.
inline std::filesystem::path normalized_target(const std::filesystem::path& target) {
  auto path = std::filesystem::absolute(target).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  if (!path.has_filename()) throw CannotExchange("tracetorch: cannot publish into " + path.string() + ": it is the root directory");
  return path;
}

/// Copies the regular file `name` of `from` into `to` (same name and permission bits).
inline bool copy_file_at(int from, int to, const char* name, int& error) {
  UniqueFd in(::openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat info {};
  if (!in || ::fstat(in.get(), &info) != 0) return error = errno, false;
  UniqueFd out(::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, info.st_mode & 07777));
  if (!out) return error = errno, false;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(in.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) return true;
      break;
    }
    for (ssize_t done = 0; done < got;) {
      const ssize_t put = ::write(out.get(), buffer + done, static_cast<std::size_t>(got - done));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        error = put < 0 ? errno : ENOSPC;
        ::unlinkat(to, name, 0);
        return false;
      }
      done += put;
    }
  }
  error = errno;
  ::unlinkat(to, name, 0);
  return false;
}

/// A copy of the symbolic link `name` of `from` in `to`.
inline bool copy_symlink_at(int from, int to, const char* name, int& error) {
  std::string target(4096, '\0');
  const ssize_t size = ::readlinkat(from, name, target.data(), target.size());
  if (size < 0 || static_cast<std::size_t>(size) == target.size()) return error = size < 0 ? errno : ENAMETOOLONG, false;
  target.resize(static_cast<std::size_t>(size));
  if (::symlinkat(target.c_str(), to, name) != 0) return error = errno, false;
  return true;
}

}  // namespace publish_detail

enum class LockMode { exclusive, shared };

/// An flock on a directory (O_RDONLY | O_DIRECTORY | O_CLOEXEC), held while the object lives.
/// Writers of a tree lock it exclusively, readers shared. The wait is bounded: the lock is polled
/// (100 us, doubling up to 10 ms) until `timeout`, then tracetorch::Error names the path. Polling,
/// not a blocking flock: a publisher keeps the lock on the tree it replaced, and a blocked waiter
/// would never learn that the path names another inode now. Locks taken through different
/// opens exclude each other within one process too (threads).
class DirectoryLock {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{60'000};

  /// Locks the directory `path` names; tracetorch::Error if there is none, or it is a symbolic
  /// link or not a directory, or the lock is not had within `timeout`.
  DirectoryLock(const std::filesystem::path& path, LockMode mode, std::chrono::milliseconds timeout = kDefaultTimeout) {
    if (!acquire(path, mode, timeout)) publish_detail::fail("cannot lock", path, ENOENT);
  }
  /// Where `path` names nothing: nullopt instead of an error.
  static std::optional<DirectoryLock> if_exists(const std::filesystem::path& path, LockMode mode,
                                                std::chrono::milliseconds timeout = kDefaultTimeout) {
    DirectoryLock lock;
    if (!lock.acquire(path, mode, timeout)) return std::nullopt;
    return lock;
  }

  int fd() const noexcept { return fd_.get(); }
  /// The locked directory's fstat at locking time.
  const struct stat& identity() const noexcept { return identity_; }

 private:
  friend std::optional<StagedDirectory> publish_once(StagedDirectory&, const CarryOver&, bool, std::chrono::milliseconds, bool&);
  DirectoryLock() = default;

  bool acquire(const std::filesystem::path& path, LockMode mode, std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout;
    auto pause = std::chrono::microseconds(100);
    for (;;) {
      struct stat named {};
      if (::lstat(path.c_str(), &named) != 0) {
        if (errno == ENOENT) return false;
        publish_detail::fail("cannot lock", path, errno);
      }
      if (S_ISLNK(named.st_mode)) {
        throw Error("tracetorch: cannot lock " + path.string() +
                    ": it is a symbolic link (a trace directory is replaced whole: name the directory itself)");
      }
      if (!S_ISDIR(named.st_mode)) throw Error("tracetorch: cannot lock " + path.string() + ": not a directory");
      publish_detail::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd && errno != ENOENT && errno != ENOTDIR && errno != ELOOP) publish_detail::fail("cannot open", path, errno);
      if (fd) {
        if (::flock(fd.get(), (mode == LockMode::exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) {
          // Exchanged between the open and the lock: the path names another inode now.
          if (::fstat(fd.get(), &identity_) == 0 && ::lstat(path.c_str(), &named) == 0 &&
              publish_detail::same_inode(identity_, named)) {
            fd_ = std::move(fd);
            return true;
          }
          continue;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) publish_detail::fail("cannot lock", path, errno);
      }
      if (clock::now() >= deadline) {
        throw Error("tracetorch: cannot lock " + path.string() + ": another process or thread held it for " +
                    std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
    }
  }

  publish_detail::UniqueFd fd_;
  struct stat identity_ {};
};

/// A fresh directory beside `target` (`.<name>.tracetorch-staging-<pid>-<16 random hex>`, made
/// with mkdir, which refuses an existing name: another random name is tried), flocked while the
/// object lives. Destroying it removes the directory and what is in it, except in a forked child
/// (it belongs to the parent) and after publish(), which gives it the target's name.
class StagedDirectory {
 public:
  explicit StagedDirectory(const std::filesystem::path& target) : target_(publish_detail::normalized_target(target)) {
    const auto parent = target_.parent_path();
    const std::string prefix = publish_detail::staging_prefix(target_.filename().string());
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto path = parent / (prefix + std::to_string(::getpid()) + "-" + publish_detail::random_hex());
      if (::mkdir(path.c_str(), 0777) != 0) {
        if (errno == EEXIST) continue;
        throw Error("tracetorch: cannot create the staging directory " + path.string() + " for " + target_.string() + ": " +
                    std::generic_category().message(errno));
      }
      publish_detail::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      struct stat mine {}, named {};
      // A publish cleaning up may have taken it for abandoned before the flock: then try another.
      if (fd && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 && ::fstat(fd.get(), &mine) == 0 &&
          ::lstat(path.c_str(), &named) == 0 && publish_detail::same_inode(mine, named)) {
        path_ = std::move(path);
        fd_ = std::move(fd);
        return;
      }
      if (!fd) ::rmdir(path.c_str());
    }
    throw Error("tracetorch: cannot create a staging directory for " + target_.string() + ": 100 names were taken");
  }
  StagedDirectory(StagedDirectory&& other) noexcept
      : target_(std::move(other.target_)), path_(std::move(other.path_)), fd_(std::move(other.fd_)), owner_(other.owner_) {}
  StagedDirectory& operator=(StagedDirectory&& other) noexcept {
    if (this != &other) {
      discard();
      target_ = std::move(other.target_);
      path_ = std::move(other.path_);
      fd_ = std::move(other.fd_);
      owner_ = other.owner_;
    }
    return *this;
  }
  ~StagedDirectory() { discard(); }

  /// Where to write the files.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// The directory it replaces on publish (absolute, normalized).
  const std::filesystem::path& target() const noexcept { return target_; }
  /// The open, flocked directory (for openat).
  int fd() const noexcept { return fd_.get(); }

  /// Removes the directory now (nothing where it was published or moved from).
  void discard() noexcept {
    if (fd_ && owner_ == ::getpid()) {
      std::error_code ignored;
      std::filesystem::remove_all(path_, ignored);
    }
    fd_.reset();
  }

 private:
  friend std::optional<StagedDirectory> publish_once(StagedDirectory&, const CarryOver&, bool, std::chrono::milliseconds, bool&);
  friend void remove_abandoned_staging(StagedDirectory&, int, const CarryOver&);
  StagedDirectory(std::filesystem::path target, std::filesystem::path path, publish_detail::UniqueFd fd)
      : target_(std::move(target)), path_(std::move(path)), fd_(std::move(fd)) {}

  std::filesystem::path target_;
  std::filesystem::path path_;
  publish_detail::UniqueFd fd_;
  pid_t owner_ = ::getpid();
};

// CarryOver (declared above): which entries of the replaced tree the new one keeps, asked for
// each name that the staged tree does not have (a name the staged tree has is always the staged one).

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

/// Removes the abandoned staging directories of `staged`'s target (no one holds their flock):
/// first every entry in them that is neither a regular file nor a symbolic link and that
/// `carry_over` keeps is moved into `staged` where neither it nor the target (`target_fd`, -1:
/// none) has that name. Those can only be entries of the target that a killed publish was moving
/// (a trace stages files only). A directory where such a move fails is kept, renamed
/// `.<name>.tracetorch-kept-<random>`, never removed.
inline void remove_abandoned_staging(StagedDirectory& staged, int target_fd, const CarryOver& carry_over) {
  namespace pd = publish_detail;
  const auto parent = staged.target_.parent_path();
  const std::string prefix = pd::staging_prefix(staged.target_.filename().string());
  pd::UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent_fd) return;  // best effort: the publish itself reports what matters
  const std::string mine = staged.path_.filename().string();
  for (const auto& name : pd::entries_of(parent_fd.get())) {
    if (name == mine || !pd::is_staging_name(name, prefix)) continue;
    pd::UniqueFd fd(::openat(parent_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat locked {}, named {};
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its writer is alive
    if (::fstat(fd.get(), &locked) != 0 || ::fstatat(parent_fd.get(), name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        !pd::same_inode(locked, named)) {
      continue;  // removed by another publish meanwhile
    }
    bool keep = false;
    for (const auto& entry : pd::entries_of(fd.get())) {
      struct stat info {};
      if (::fstatat(fd.get(), entry.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || S_ISREG(info.st_mode) ||
          S_ISLNK(info.st_mode) || !carry_over(entry)) {
        continue;
      }
      if (pd::exists_at(staged.fd(), entry.c_str()) || (target_fd >= 0 && pd::exists_at(target_fd, entry.c_str())) ||
          pd::rename_at(fd.get(), entry.c_str(), staged.fd(), entry.c_str(), pd::kRenameNoReplace) != 0) {
        keep = true;
      }
    }
    if (keep) {
      const std::string kept = "." + staged.target_.filename().string() + ".tracetorch-kept-" + pd::random_hex();
      if (::renameat(parent_fd.get(), name.c_str(), parent_fd.get(), kept.c_str()) == 0) continue;
    }
    std::error_code ignored;
    std::filesystem::remove_all(parent / name, ignored);
  }
}

/// One attempt of publish(); `retry` is set where the target appeared or changed meanwhile.
inline std::optional<StagedDirectory> publish_once(StagedDirectory& staged, const CarryOver& carry_over, bool sync,
                                                   std::chrono::milliseconds timeout, bool& retry) {
  namespace pd = publish_detail;
  retry = false;
  const auto& target = staged.target_;
  const auto parent = target.parent_path();
  auto lock = DirectoryLock::if_exists(target, LockMode::exclusive, timeout);
  if (!lock) {  // a first tree: a rename that refuses to replace whatever another writer put there
    remove_abandoned_staging(staged, -1, carry_over);
    if (sync) ::fsync(staged.fd());
    if (pd::rename_at(AT_FDCWD, staged.path_.c_str(), AT_FDCWD, target.c_str(), pd::kRenameNoReplace) != 0) {
      if (errno == EEXIST) return retry = true, std::nullopt;
      pd::fail("cannot rename " + staged.path_.string() + " to", target, errno);
    }
    if (sync) pd::sync_directory(parent);
    staged.fd_.reset();  // published: unlocked, and no longer removed on destruction
    return std::nullopt;
  }

  const struct stat& old_tree = lock->identity();
  struct stat parent_info {}, cwd {};
  if (::stat(parent.c_str(), &parent_info) != 0) pd::fail("cannot read", parent, errno);
  if (parent_info.st_dev != old_tree.st_dev) {
    throw CannotExchange("tracetorch: cannot publish into " + target.string() + ": it is a mount point");
  }
  if (::stat(".", &cwd) == 0 && pd::same_inode(cwd, old_tree)) {
    throw CannotExchange("tracetorch: cannot publish into " + target.string() +
                         ": it is this process's working directory, which an exchange would leave in the replaced tree");
  }
  remove_abandoned_staging(staged, lock->fd(), carry_over);

  // Carry over: a hard link of each kept entry (a copy where links fail); directories and other
  // entries that cannot be linked are moved after the exchange.
  std::unordered_map<std::string, struct stat> carried;  // name -> the entry linked or copied
  for (const auto& name : pd::entries_of(lock->fd())) {
    struct stat info {};
    if (!carry_over(name) || pd::exists_at(staged.fd(), name.c_str()) ||
        ::fstatat(lock->fd(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(info.st_mode)) {
      continue;
    }
    if (::linkat(lock->fd(), name.c_str(), staged.fd(), name.c_str(), 0) == 0) {
      carried.emplace(name, info);
      continue;
    }
    const int link_error = errno;
    if (link_error == ENOENT) continue;  // removed meanwhile
    int copy_error = 0;
    const bool copied = S_ISREG(info.st_mode)   ? pd::copy_file_at(lock->fd(), staged.fd(), name.c_str(), copy_error)
                        : S_ISLNK(info.st_mode) ? pd::copy_symlink_at(lock->fd(), staged.fd(), name.c_str(), copy_error)
                                                : false;
    if (copied) {
      carried.emplace(name, info);
    } else if (S_ISREG(info.st_mode) || S_ISLNK(info.st_mode)) {
      throw Error("tracetorch: cannot keep " + (target / name).string() + " in the new tree (link: " +
                  std::generic_category().message(link_error) + ", copy: " + std::generic_category().message(copy_error) +
                  "); " + target.string() + " is unchanged");
    }
  }
  ::fchmod(staged.fd(), old_tree.st_mode & 07777);
  if (sync) ::fsync(staged.fd());

  if (pd::rename_at(AT_FDCWD, staged.path_.c_str(), AT_FDCWD, target.c_str(), pd::kRenameExchange) != 0) {
    const int error = errno;
    if (error == EINVAL || error == ENOSYS || error == EXDEV || error == EBUSY || error == ENOTSUP) {
      throw CannotExchange("tracetorch: cannot publish into " + target.string() +
                           ": exchanging it with its staging directory failed: " + std::generic_category().message(error));
    }
    if (error == ENOENT) return retry = true, std::nullopt;  // removed by someone who does not lock
    pd::fail("cannot exchange " + staged.path_.string() + " with", target, error);
  }

  // The replaced tree is at the staging name now, and from here on never removed by accident:
  // it may hold directories of the target's that are not moved back yet.
  const pd::UniqueFd new_tree(staged.fd_.release());  // locked until the moves are done
  StagedDirectory replaced(target, staged.path_, std::move(lock->fd_));
  // What the replaced tree still holds that the new tree keeps (directories, entries made or
  // replaced after they were linked) moves over; the links it shares with the new tree go, so
  // that it holds only what the new tree replaced or refused.
  std::string failed;
  try {
    for (const auto& name : pd::entries_of(replaced.fd())) {
      if (!carry_over(name)) continue;
      struct stat now {};
      if (::fstatat(replaced.fd(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const auto found = carried.find(name);
      int moved = 0;
      if (found != carried.end() && pd::same_inode(found->second, now)) {
        moved = ::unlinkat(replaced.fd(), name.c_str(), 0);
      } else if (found != carried.end()) {
        moved = ::renameat(replaced.fd(), name.c_str(), new_tree.get(), name.c_str());  // newer than the one kept
      } else if (!pd::exists_at(new_tree.get(), name.c_str())) {
        moved = pd::rename_at(replaced.fd(), name.c_str(), new_tree.get(), name.c_str(), pd::kRenameNoReplace);
      }
      if (moved != 0 && errno != ENOENT && failed.empty()) {
        failed = (replaced.path_ / name).string() + ": " + std::generic_category().message(errno);
      }
    }
  } catch (const std::exception& error) {  // from carry_over, or out of memory
    failed = error.what();
  }
  if (sync) pd::sync_directory(parent);  // after the moves: the user's directories are away only briefly
  if (!failed.empty()) {
    const auto kept = parent / ("." + target.filename().string() + ".tracetorch-kept-" + pd::random_hex());
    std::error_code ec;
    std::filesystem::rename(replaced.path_, kept, ec);
    replaced.fd_.reset();  // never removed: it holds an entry the new tree should have
    throw Error("tracetorch: published " + target.string() + ", but could not move an entry of the replaced tree into it: " +
                failed + "; the replaced tree is kept as " + (ec ? replaced.path_ : kept).string());
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
/// that failed; CannotExchange where an exchange is impossible there (nothing changed).
inline std::optional<StagedDirectory> publish(StagedDirectory staged, const CarryOver& carry_over = keep_every_entry,
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
