#pragma once
/// \file
/// Whole-file writes that never leave a half-written file behind: the bytes go to a
/// temporary file beside the target, which is renamed over it only once complete.

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <fcntl.h>     // AT_FDCWD, open, F_SETLEASE
#include <sys/stat.h>  // lstat
#include <unistd.h>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/checked_file.hpp"
#include "tracetorch/detail/fs/directory_at.hpp"      // publish_detail::exchange_or_rename_at
#include "tracetorch/detail/fs/staged_directory.hpp"  // publish_detail::random_hex

namespace tracetorch::detail {

/// `<pid>-<n>-<16 random hex>`, a different text at each call in this process and from any
/// other process, including a later one with the same pid (whose leftovers, after a kill, a pid
/// and a counter alone would collide with): for names that no other writer uses.
inline std::string unique_suffix() {
  static std::atomic<unsigned long long> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" + publish_detail::random_hex();
}

/// A name beside `target` that no other writer uses: several threads of one process may
/// write the same target at once (two traces of one model type into one debug_path), and each
/// must write its own temporary file or they would interleave their bytes in one.
inline std::filesystem::path unique_temp_path(const std::filesystem::path& target) {
  return target.string() + ".tmp" + unique_suffix();
}

/// Gives the file `staged` the name `target`, replacing a file there in one step. Where `target`
/// is a regular file, the two are exchanged (renameat2 RENAME_EXCHANGE): when a plain rename
/// replaces an existing file, ext4 (auto_da_alloc) starts writing the new file's data back in the
/// caller's time (docs/performance.md); an exchange does not.
/// Elsewhere (no file there yet, a filesystem or kernel without exchange), a plain rename.
/// Returns true where the replaced file now has the name `staged`, for the caller to remove or keep.
inline bool replace_file_keeping_old(const std::filesystem::path& staged, const std::filesystem::path& target,
                                     std::error_code& ec) {
  ec.clear();
  const int how = publish_detail::exchange_or_rename_at(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str());
  if (how < 0) ec = std::error_code(errno, std::generic_category());
  return how == 1;
}

/// replace_file_keeping_old, then the replaced file is removed.
inline void replace_file(const std::filesystem::path& staged, const std::filesystem::path& target, std::error_code& ec) {
  if (replace_file_keeping_old(staged, target, ec)) ::unlink(staged.c_str());
}

/// Writes pieces one after another into a temporary file and renames it to `target` on commit().
/// Destroying an uncommitted writer removes the temporary file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target)
      : target_(std::move(target)), temp_(unique_temp_path(target_)), file_(target_) {
    // "x" (O_EXCL): never reuse, or write through a symbolic link planted at, the temporary name;
    // a name taken (by a leftover, against the odds of its random part) gets another one.
    std::FILE* opened = nullptr;
    for (int attempt = 0; attempt < 8 && (opened = std::fopen(temp_.c_str(), "wbx")) == nullptr && errno == EEXIST; ++attempt) {
      temp_ = unique_temp_path(target_);
    }
    file_.adopt(opened);
  }
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter() {
    if (!committed_) std::remove(temp_.c_str());
  }

  void write(const void* data, std::size_t size) { file_.write(data, size); }
  void write(std::string_view text) { file_.write(text); }

  /// Flushes and closes the temporary file: after this, only the rename of commit() is left,
  /// so writers of files that belong together can all finish() before any of them commits.
  void finish() { file_.close(); }

  void commit() {
    finish();
    std::error_code ec;
    replace_file(temp_, target_, ec);
    if (ec) throw Error("tracetorch: cannot write " + target_.string() + ": " + ec.message());
    committed_ = true;
  }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  CheckedFile file_;
  bool committed_ = false;
};

/// Writes `content` to `target` atomically.
inline void write_file_atomically(const std::filesystem::path& target, std::string_view content) {
  AtomicFileWriter writer(target);
  writer.write(content);
  writer.commit();
}

}  // namespace tracetorch::detail
