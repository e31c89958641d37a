#pragma once
/// \file
/// The files a trace replaced, kept so that the next trace into the same directory writes over
/// them (DebuggerOptions::reuse_previous_files).
//
// Why: on a VM that hands the memory of deleted files back to its host, a trace written into new
// files pays for every page twice (the host's fault, then the copy); written over pages the file
// cache still holds, it does not (docs/performance.md).

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "tracetorch/detail/io/atomic_file.hpp"  // unique_suffix

namespace tracetorch::detail {

/// One hidden directory in a debug_path (`.tracetorch-spares-<pid>-<n>`) holding the previous
/// versions of its tensor files under their own names. The staged files of a trace are made
/// there too, so that exchanging one with its target leaves the old version in place as a spare.
class SpareFiles {
 public:
  SpareFiles(std::string key, const std::filesystem::path& debug_path)
      : key_(std::move(key)),
        directory_(debug_path / (".tracetorch-spares-" + unique_suffix())),
        owner_(::getpid()) {}
  SpareFiles(const SpareFiles&) = delete;
  SpareFiles& operator=(const SpareFiles&) = delete;
  /// Removes the directory it made, except in a forked child: that belongs to the parent.
  ~SpareFiles() {
    if (!made_ || ::getpid() != owner_) return;
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  /// Called as a forward begins: false where the directory cannot be made (the trace is then
  /// staged beside its targets, as without spares). A directory removed since the last forward
  /// (with its debug_path, say) is made again, empty.
  bool prepare() {
    struct stat info {};
    if (made_ && ::lstat(directory_.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return true;
    spares_.clear();
    made_ = ::mkdir(directory_.c_str(), 0700) == 0;  // fails where something else took the name
    return made_;
  }

  /// The staged path for `file_name` in this forward, where the spare of that name (if any) is
  /// to be written over; nullopt where the name is taken already in this forward (two stems may
  /// escape to one name), and the caller stages beside the target instead.
  std::optional<std::filesystem::path> claim(const std::string& file_name) {
    const std::pmr::string name(file_name, &names_memory_);
    if (!claimed_.insert(name).second) return std::nullopt;
    spares_.erase(name);
    return directory_ / file_name;
  }

  /// The staged file `file_name` took its target's name; `kept_old` (replace_file_keeping_old's
  /// answer): the replaced file now sits at the staged path, a spare for the next trace.
  void placed(const std::string& file_name, bool kept_old) {
    if (kept_old) spares_.emplace(file_name);
  }

  /// Removes the spares this forward did not claim (their names are not in the new trace), then
  /// forgets the claims: called once the new trace's files are complete, before they are placed.
  void drop_unclaimed() {
    for (const auto& name : spares_) ::unlink((directory_ / name).c_str());
    spares_.clear();
    claimed_.clear();
  }
  /// After a failed forward: its staged files are gone, the spares it did not claim stay.
  void forget_claims() { claimed_.clear(); }
  bool empty() const { return spares_.empty(); }

  /// The registry's name for the debug_path (its canonical form).
  const std::string& key() const { return key_; }

 private:
  std::string key_;
  std::filesystem::path directory_;
  pid_t owner_;
  bool made_ = false;
  // The names' memory is pooled and kept: claims live until the forward returns, and heap
  // memory held that long is what forward_memory.hpp keeps out of malloc's heap.
  std::pmr::unsynchronized_pool_resource names_memory_;
  std::pmr::unordered_set<std::pmr::string> spares_{&names_memory_};
  std::pmr::unordered_set<std::pmr::string> claimed_{&names_memory_};
};

/// The process's spares, one set per debug_path, lent to one forward at a time: two traces into
/// one directory at once get a set each, and the second returned is dropped. What is left is
/// removed when the process exits (static destruction).
class SpareFilesRegistry {
 public:
  static SpareFilesRegistry& instance() {
    static SpareFilesRegistry registry;
    return registry;
  }

  /// The idle set of `debug_path`; where there is none, a new one if `make_one`, else null.
  std::unique_ptr<SpareFiles> borrow(const std::filesystem::path& debug_path, bool make_one) {
    const std::string key = key_of(debug_path);
    {
      std::lock_guard lock(mutex_);
      const auto found = idle_.find(key);
      if (found != idle_.end()) {
        auto spares = std::move(found->second);
        idle_.erase(found);
        return spares;
      }
    }
    return make_one ? std::make_unique<SpareFiles>(key, debug_path) : nullptr;
  }

  void give_back(std::unique_ptr<SpareFiles> spares) {
    std::unique_ptr<SpareFiles> surplus;  // destroyed (its directory removed) after the lock is released
    std::lock_guard lock(mutex_);
    auto& slot = idle_[spares->key()];
    (slot ? surplus : slot) = std::move(spares);
  }

 private:
  static std::string key_of(const std::filesystem::path& debug_path) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(debug_path, ec);
    return ec ? std::filesystem::absolute(debug_path, ec).lexically_normal().string() : canonical.string();
  }

  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<SpareFiles>> idle_;
};

}  // namespace tracetorch::detail
