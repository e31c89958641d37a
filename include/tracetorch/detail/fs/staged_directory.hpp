#pragma once
/// \file
/// StagedDirectory: the fresh, flocked sibling of a target that a trace is written into before
/// publish(), and the unique names beside the target (staging and kept names, random_hex).

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/directory_at.hpp"
#include "tracetorch/detail/fs/directory_lock.hpp"
#include "tracetorch/detail/fs/fault_injection.hpp"

namespace tracetorch::detail {

/// The directory cannot be replaced by an exchange (a mount point, the root, this process's
/// working directory, a filesystem without RENAME_EXCHANGE); nothing was changed. A caller can
/// fall back to placing files one by one.
class CannotExchange : public Error {
 public:
  using Error::Error;
};

class StagedDirectory;
/// Which entries of the replaced tree the new one keeps, asked for each name that the staged tree
/// does not have (a name the staged tree has is always the staged one). See publish().
using CarryOver = std::function<bool(std::string_view name)>;
std::optional<StagedDirectory> publish_once(StagedDirectory&, const CarryOver&, bool, std::chrono::milliseconds, bool&);

namespace publish_detail {

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

/// `.<name>.tracetorch-kept-<16 random hex>`: where a tree that must never be removed is kept.
inline std::string kept_name(const std::string& name) { return "." + name + ".tracetorch-kept-" + random_hex(); }

/// The target as an absolute path without "." or ".." parts or a trailing separator.
inline std::filesystem::path normalized_target(const std::filesystem::path& target) {
  auto path = std::filesystem::absolute(target).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  if (!path.has_filename()) throw CannotExchange("tracetorch: cannot publish into " + path.string() + ": it is the root directory");
  return path;
}

}  // namespace publish_detail

/// A fresh directory beside `target` (`.<name>.tracetorch-staging-<pid>-<16 random hex>`, made
/// with mkdir, which refuses an existing name: another random name is tried), flocked while the
/// object lives. Destroying it removes the directory and what is in it, except in a forked child
/// (it belongs to the parent) and after publish(), which gives it the target's name.
class StagedDirectory {
 public:
  explicit StagedDirectory(const std::filesystem::path& target)
      : StagedDirectory(publish_detail::normalized_target(target), std::nullopt) {}
  /// The same, made inside `directory` as `<prefix><pid>-<16 random hex>` (the debugger stages
  /// inside debug_path and moves the directory beside it to publish: move_beside_target()).
  StagedDirectory(const std::filesystem::path& target, const std::filesystem::path& directory, std::string_view prefix)
      : StagedDirectory(publish_detail::normalized_target(target), std::pair(directory, std::string(prefix))) {}
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

  /// Asks the kernel where the directory is now (another writer's publish may have moved it
  /// with the tree it was in) and names it so. False where it was removed, or where that cannot
  /// be known (no /proc): then path() stays as it was.
  bool follow() {
    if (!fd_) return false;
    std::string where(4096, '\0');
    const auto link = "/proc/self/fd/" + std::to_string(fd_.get());
    const ssize_t size = ::readlink(link.c_str(), where.data(), where.size());
    if (size <= 0 || static_cast<std::size_t>(size) == where.size()) return false;
    where.resize(static_cast<std::size_t>(size));
    struct stat mine {}, named {};
    if (::fstat(fd_.get(), &mine) != 0 || mine.st_nlink == 0 || ::lstat(where.c_str(), &named) != 0 ||
        !publish_detail::same_inode(mine, named)) {
      return false;  // removed (the link reads "<path> (deleted)"), or moved again meanwhile
    }
    path_ = std::move(where);
    return true;
  }

  /// Renames the directory to `new_path`, where nothing is (renameat2 RENAME_NOREPLACE); false
  /// with errno set where that fails.
  bool move_to(const std::filesystem::path& new_path) {
    if (injected_fault("move out")) return false;
    if (publish_detail::rename_at(AT_FDCWD, path_.c_str(), AT_FDCWD, new_path.c_str(), publish_detail::kRenameNoReplace) != 0) {
      return false;
    }
    path_ = new_path;
    return true;
  }

  /// Moves the directory beside its target under a fresh staging name, from wherever it is now
  /// (follow()); false with errno set where the parent cannot take it (EACCES, EXDEV, ...).
  bool move_beside_target() {
    const std::string prefix = publish_detail::staging_prefix(target_.filename().string());
    for (int attempt = 0; attempt < 100; ++attempt) {
      follow();
      const auto beside = target_.parent_path() / (prefix + std::to_string(::getpid()) + "-" + publish_detail::random_hex());
      if (move_to(beside)) return true;
      if (errno != EEXIST && errno != ENOENT) return false;  // ENOENT: moved meanwhile, follow it again
    }
    return false;
  }

  /// Lets the directory go without removing it (it was removed or is another's now).
  void close_without_removing() noexcept { fd_.reset(); }

  /// False in a process forked from the one that made it: there the directory is the parent's.
  bool made_by_this_process() const noexcept { return owner_ == ::getpid(); }

  /// Removes the directory now (nothing where it was published or moved from): what it holds
  /// through its descriptor, then its name where that still names it. Another writer's publish
  /// may have moved it, or put something else at its name: nothing but this directory is removed.
  void discard() noexcept {
    if (fd_ && made_by_this_process()) {
      try {
        follow();
        // Never the target itself: a directory published as the target (by a process that
        // shared this one's descriptor) is a trace, with the user's files beside it, now.
        struct stat mine {}, target {};
        if (::fstat(fd_.get(), &mine) == 0 && ::stat(target_.c_str(), &target) == 0 && publish_detail::same_inode(mine, target)) {
          fd_.reset();
          return;
        }
        publish_detail::remove_locked_tree(AT_FDCWD, path_.string(), fd_.get());
      } catch (...) {  // out of memory for a name: the directory stays, as an abandoned one
      }
    }
    fd_.reset();
  }

 private:
  using MadeIn = std::optional<std::pair<std::filesystem::path, std::string>>;
  /// Makes the directory beside `target` (normalized), or where `inside` says.
  StagedDirectory(std::filesystem::path target, const MadeIn& inside) : target_(std::move(target)) {
    const auto parent = inside ? inside->first : target_.parent_path();
    const std::string prefix = inside ? inside->second : publish_detail::staging_prefix(target_.filename().string());
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto path = parent / (prefix + std::to_string(::getpid()) + "-" + publish_detail::random_hex());
      if (::mkdir(path.c_str(), inside ? 0700 : 0777) != 0) {
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

  friend std::optional<StagedDirectory> publish_once(StagedDirectory&, const CarryOver&, bool, std::chrono::milliseconds, bool&);
  /// The tree a publish replaced, now at the staging name `path`, keeping the target's `lock`.
  StagedDirectory(std::filesystem::path target, std::filesystem::path path, DirectoryLock&& lock)
      : target_(std::move(target)), path_(std::move(path)), fd_(std::move(lock.fd_)) {}

  std::filesystem::path target_;
  std::filesystem::path path_;
  publish_detail::UniqueFd fd_;
  pid_t owner_ = ::getpid();
};

}  // namespace tracetorch::detail
