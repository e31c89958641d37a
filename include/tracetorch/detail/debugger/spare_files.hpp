#pragma once
/// \file
/// The directory a trace is written into before it is published (TraceStaging), kept between
/// traces with the files the last trace replaced, so that the next trace into the same
/// debug_path writes over them (DebuggerOptions::reuse_previous_files).
//
// Why keep them: on a VM that hands the memory of deleted files back to its host, a trace written
// into new files pays for every page twice (the host's fault, then the copy); written over pages
// the file cache still holds, it does not (docs/performance.md).

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "tracetorch/detail/fs/staged_directory.hpp"

namespace tracetorch::detail {

/// The start of a staging directory's name inside debug_path; the rest is `<pid>-<16 hex>`.
inline constexpr char kSparesPrefix[] = ".tracetorch-spares-";

/// A staging directory of one debug_path: made inside it (`.tracetorch-spares-<pid>-<16 hex>`,
/// flocked by this process while the object lives, so that no other writer takes it for a
/// leftover), written through its descriptor, moved beside debug_path to be published
/// (trace_publish.hpp). After a publish it is the tree that was replaced, back inside debug_path
/// under the same name, holding the previous files the new trace replaced: the spares.
/// Destroying it removes it wherever it is then.
class TraceStaging {
 public:
  /// Makes the directory in `debug_path` (normalized); `key`: the registry's name for it.
  TraceStaging(std::string key, const std::filesystem::path& debug_path)
      : key_(std::move(key)), directory_(debug_path, debug_path, kSparesPrefix), name_(directory_.path().filename().string()) {}
  TraceStaging(const TraceStaging&) = delete;
  TraceStaging& operator=(const TraceStaging&) = delete;
  ~TraceStaging() { forget_or_follow(); }

  StagedDirectory& directory() noexcept { return directory_; }
  int fd() const noexcept { return directory_.fd(); }
  /// Its name inside debug_path.
  const std::string& name() const noexcept { return name_; }
  /// The registry's name for its debug_path (the canonical form).
  const std::string& key() const noexcept { return key_; }

  /// After a publish: the replaced tree takes this directory's place (and name).
  void adopt(StagedDirectory replaced) { directory_ = std::move(replaced); }

  /// True where it still exists and is directly inside `debug_path`: a spares directory whose
  /// debug_path was removed, or moved elsewhere, is not used again.
  bool inside(const std::filesystem::path& debug_path) const {
    struct stat mine {}, parent {}, target {};
    return directory_.fd() >= 0 && ::fstat(directory_.fd(), &mine) == 0 && mine.st_nlink > 0 &&
           ::fstatat(directory_.fd(), "..", &parent, 0) == 0 && ::stat(debug_path.c_str(), &target) == 0 &&
           publish_detail::same_inode(parent, target);
  }

 private:
  /// Before it is removed: where it went, if it was moved; left alone where it is gone.
  void forget_or_follow() noexcept {
    try {
      if (directory_.fd() >= 0 && !directory_.follow()) {
        struct stat mine {};
        if (::fstat(directory_.fd(), &mine) != 0 || mine.st_nlink == 0) directory_.close_without_removing();
      }
    } catch (...) {
    }
  }

  std::string key_;
  StagedDirectory directory_;
  std::string name_;
};

/// The process's idle spares, one set per debug_path, lent to one forward at a time: two traces
/// into one directory at once get a set each, and the second given back is dropped. What is
/// left is removed when the process exits (static destruction).
class SpareFilesRegistry {
 public:
  static SpareFilesRegistry& instance() {
    static SpareFilesRegistry registry;
    return registry;
  }

  /// The idle set of `debug_path`, or null. A forked child finds its parent's sets here, and
  /// they stay the parent's: the child's trace would write over them and publish the directory as
  /// debug_path itself, and the parent, removing what it took for its spares, would then empty
  /// debug_path. The child lets them go unused (and unremoved) and makes its own.
  std::unique_ptr<TraceStaging> borrow(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto found = idle_.find(key);
    if (found == idle_.end()) return nullptr;
    auto spares = std::move(found->second);
    idle_.erase(found);
    if (!spares->directory().made_by_this_process()) return nullptr;
    return spares;
  }

  void give_back(std::unique_ptr<TraceStaging> spares) {
    std::unique_ptr<TraceStaging> surplus;  // destroyed (its directory removed) after the lock is released
    std::lock_guard lock(mutex_);
    auto& slot = idle_[spares->key()];
    (slot ? surplus : slot) = std::move(spares);
  }

  /// The registry's name for `debug_path`: its canonical form.
  static std::string key_of(const std::filesystem::path& debug_path) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(debug_path, ec);
    return ec ? std::filesystem::absolute(debug_path, ec).lexically_normal().string() : canonical.string();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<TraceStaging>> idle_;
};

}  // namespace tracetorch::detail
