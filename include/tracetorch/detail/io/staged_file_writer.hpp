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

#include "tracetorch/detail/error.hpp"
#include "tracetorch/detail/io/atomic_file.hpp"  // may_write_over

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
      : directory_(directory), name_(std::move(name)), shown_as_(std::move(shown_as)) {
    const int existing = ::openat(directory_, name_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (existing >= 0) {
      if (may_write_over(existing) && (file_ = ::fdopen(existing, "wb")) != nullptr) {  // "w" of fdopen does not truncate
        truncate_at_finish_ = true;
        return;
      }
      ::close(existing);
    }
    ::unlinkat(directory_, name_.c_str(), 0);
    const int fd = ::openat(directory_, name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) fail("cannot create");
    file_ = ::fdopen(fd, "wb");
    if (file_ == nullptr) {
      const int error = errno;
      ::close(fd);
      errno = error;
      fail("cannot create");
    }
  }
  StagedFileWriter(const StagedFileWriter&) = delete;
  StagedFileWriter& operator=(const StagedFileWriter&) = delete;
  ~StagedFileWriter() {
    if (file_ != nullptr) std::fclose(file_);
    if (!finished_) ::unlinkat(directory_, name_.c_str(), 0);
  }

  void write(const void* data, std::size_t size) {
    if (file_ == nullptr) throw Error("tracetorch: cannot write " + shown_as_.string() + ": already finished");
    if (size != 0 && std::fwrite(data, 1, size, file_) != size) fail("cannot write");
  }
  void write(std::string_view text) { write(text.data(), text.size()); }

  /// Flushes and closes the file, which stays: the caller publishes or removes it.
  void finish() {
    if (finished_) return;
    if (file_ == nullptr) throw Error("tracetorch: cannot write " + shown_as_.string() + ": an earlier write failed");
    // fflush + fclose report a full disk that buffered fwrite calls did not.
    bool flushed = std::fflush(file_) == 0;
    // Written over an older file: what it held beyond the new end goes.
    if (flushed && truncate_at_finish_) flushed = ::ftruncate(::fileno(file_), ::ftello(file_)) == 0;
    const int saved_errno = errno;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!flushed || !closed) {
      errno = flushed ? errno : saved_errno;
      fail("cannot write");
    }
    finished_ = true;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw Error("tracetorch: " + std::string(what) + " " + shown_as_.string() + ": " + std::strerror(errno));
  }

  int directory_;
  std::string name_;
  std::filesystem::path shown_as_;
  std::FILE* file_ = nullptr;
  bool finished_ = false;
  bool truncate_at_finish_ = false;
};

}  // namespace tracetorch::detail
