#pragma once
/// \file
/// StagedFileWriter: writes one file of a staging directory through the directory's descriptor,
/// over the file already there where that is safe (a spare of the previous trace).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/detail/fs/atomic_file.hpp"  // may_write_over
#include "tracetorch/detail/fs/checked_file.hpp"

namespace tracetorch::detail {

/// Writes the file `name` in the directory open at `directory` (a staging directory this process
/// made and flocked, so no other writer uses its names). Through the descriptor: another
/// writer's publish may move the directory meanwhile. A file already at `name` is written over
/// where may_write_over() allows it: its pages in the file cache are reused instead of new ones
/// allocated, much faster on a VM whose host takes back the memory a deleted file frees
/// (docs/performance.md). Otherwise it is removed and a new file made (O_EXCL, never through a
/// symbolic link). Errors name `shown_as`, the file's final path. Destroyed before finish(): the
/// file is removed.
class StagedFileWriter {
 public:
  StagedFileWriter(int directory, std::string name, std::filesystem::path shown_as)
      : directory_(directory), name_(std::move(name)), file_(std::move(shown_as)) {
    const int existing = ::openat(directory_, name_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (existing >= 0) {
      std::FILE* over = may_write_over(existing) ? ::fdopen(existing, "wb") : nullptr;  // "w" of fdopen does not truncate
      if (over != nullptr) {
        file_.adopt(over);
        written_over_ = true;
        return;
      }
      ::close(existing);
    }
    ::unlinkat(directory_, name_.c_str(), 0);
    const int fd = ::openat(directory_, name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) file_.fail("cannot create");
    std::FILE* created = ::fdopen(fd, "wb");
    if (created == nullptr) {
      const int error = errno;
      ::close(fd);
      errno = error;
    }
    file_.adopt(created);
  }
  StagedFileWriter(const StagedFileWriter&) = delete;
  StagedFileWriter& operator=(const StagedFileWriter&) = delete;
  ~StagedFileWriter() {
    if (!file_.closed()) ::unlinkat(directory_, name_.c_str(), 0);
  }

  void write(const void* data, std::size_t size) { file_.write(data, size); }
  void write(std::string_view text) { file_.write(text); }

  /// Flushes and closes the file, which stays: the caller publishes or removes it. Written over
  /// an older file: what it held beyond the new end goes.
  void finish() { file_.close(written_over_); }

 private:
  int directory_;
  std::string name_;
  CheckedFile file_;
  bool written_over_ = false;
};

}  // namespace tracetorch::detail
