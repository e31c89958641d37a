#pragma once
/// \file
/// DirectoryLock: a bounded, polled flock on a directory inode that a path names (LockMode), and
/// the small POSIX helpers that it, StagedDirectory and publish() share (UniqueFd, fail, same_inode).

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/fault_injection.hpp"

namespace tracetorch::detail {

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

inline bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

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
  friend class StagedDirectory;  // the tree a publish replaced keeps its lock (publish_once)
  DirectoryLock() = default;

  bool acquire(const std::filesystem::path& path, LockMode mode, std::chrono::milliseconds timeout) {
    if (injected_fault("lock")) publish_detail::fail("cannot lock", path, errno);
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

}  // namespace tracetorch::detail
