#pragma once
/// \file
/// StagedFileWriter: writes one file of a staging directory through the directory's descriptor,
/// over the file already there where that is safe (a spare of the previous trace).

#include <fcntl.h>
#include <signal.h>  // SIGURG
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/directory_lock.hpp"  // UniqueFd
#include "tracetorch/detail/fs/fault_injection.hpp"

namespace tracetorch::detail {

/// True where the file open at `fd` may be written over in place: a regular file of one link
/// that nobody else has open or mapped (the kernel grants a write lease only then), so that no
/// reader and no other name of it sees its bytes change. `size` receives its size.
/// While the lease is held, a process that opens the file makes the kernel signal the holder,
/// with SIGIO unless F_SETSIG says otherwise; SIGIO's default action ends the process. So the
/// lease is asked for with SIGURG, which is ignored by default: a scan of the spares (`grep -r`,
/// a backup) that opens a file in that instant no longer kills the traced program.
inline bool may_write_over(int fd, off_t& size) noexcept {
  struct stat info {};
  const bool alone = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_nlink == 1 &&
                     ::fcntl(fd, F_SETSIG, SIGURG) == 0 && ::fcntl(fd, F_SETLEASE, F_WRLCK) == 0;
  // Tests open the file from another process here ("lease held"); a non-zero return from the
  // injector counts as a refused lease.
  const bool refused = alone && injected_fault("lease held");
  if (alone) ::fcntl(fd, F_SETLEASE, F_UNLCK);
  size = info.st_size;
  return alone && !refused;
}

/// Writes the file `name` in the directory open at `directory` (a staging directory this process
/// made and flocked, so no other writer uses its names). Through the descriptor: another
/// writer's publish may move the directory meanwhile. A file already at `name` is written over
/// where may_write_over() allows it: its pages in the file cache are reused instead of new ones
/// allocated, much faster on a VM whose host takes back the memory a deleted file frees
/// (docs/performance.md). Otherwise it is removed and a new file made (O_EXCL, never through a
/// symbolic link). Errors name `shown_as`, the file's final path. Destroyed before finish(): the
/// file is removed.
///
/// On the descriptor itself, not stdio: a traced forward writes a file per tensor, and on a VM
/// each system call costs microseconds. Small pieces (a safetensors header) wait in a buffer
/// and go out with the next large one in one writev; a file written over is cut only where its
/// old size differs.
class StagedFileWriter {
 public:
  StagedFileWriter(int directory, std::string name, std::filesystem::path shown_as)
      : directory_(directory), name_(std::move(name)), shown_as_(std::move(shown_as)) {
    // O_NONBLOCK: a FIFO at the name (a user's entry named like a trace file, replaced by an
    // earlier trace and kept with its spares) would block a plain open until a reader came.
    publish_detail::UniqueFd existing(
        ::openat(directory_, name_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (existing && may_write_over(existing.get(), old_size_)) {
      fd_ = std::move(existing);
      written_over_ = true;
      return;
    }
    existing.reset();
    ::unlinkat(directory_, name_.c_str(), 0);
    fd_.reset(::openat(directory_, name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (!fd_) fail("cannot create");
  }
  StagedFileWriter(const StagedFileWriter&) = delete;
  StagedFileWriter& operator=(const StagedFileWriter&) = delete;
  ~StagedFileWriter() {
    if (!finished_) {
      fd_.reset();
      ::unlinkat(directory_, name_.c_str(), 0);
    }
  }

  void write(const void* data, std::size_t size) {
    if (!fd_) throw Error("tracetorch: cannot write " + shown_as_.string() + (finished_ ? ": already finished" : ": an earlier write failed"));
    if (size <= sizeof(buffer_) - buffered_) {
      std::memcpy(buffer_ + buffered_, data, size);
      buffered_ += size;
      return;
    }
    write_out(static_cast<const char*>(data), size);
  }
  void write(std::string_view text) { write(text.data(), text.size()); }

  /// Writes what is buffered and closes the file, which stays: the caller publishes or removes
  /// it. Written over an older file: what it held beyond the new end goes.
  void finish() {
    if (finished_) return;
    if (!fd_) throw Error("tracetorch: cannot write " + shown_as_.string() + ": an earlier write failed");
    write_out(nullptr, 0);
    if (written_over_ && old_size_ != static_cast<off_t>(position_) && ::ftruncate(fd_.get(), static_cast<off_t>(position_)) != 0) {
      fail("cannot write");
    }
    if (::close(fd_.release()) != 0) fail("cannot write");
    finished_ = true;
  }

 private:
  /// The buffer, then `size` bytes of `data`, in as few writev calls as the kernel allows.
  void write_out(const char* data, std::size_t size) {
    iovec pieces[2] = {{buffer_, buffered_}, {const_cast<char*>(data), size}};
    buffered_ = 0;
    int first = 0;  // the first piece with bytes left
    while (first < 2) {
      if (pieces[first].iov_len == 0) {
        ++first;
        continue;
      }
      const ssize_t done = ::writev(fd_.get(), pieces + first, 2 - first);
      if (done <= 0) {
        if (done < 0 && errno == EINTR) continue;
        const int error = done < 0 ? errno : ENOSPC;
        fd_.reset();
        errno = error;
        fail("cannot write");
      }
      position_ += static_cast<std::size_t>(done);
      auto left = static_cast<std::size_t>(done);
      for (; first < 2 && left >= pieces[first].iov_len; ++first) left -= pieces[first].iov_len;
      if (first < 2) {
        pieces[first].iov_base = static_cast<char*>(pieces[first].iov_base) + left;
        pieces[first].iov_len -= left;
      }
    }
  }

  [[noreturn]] void fail(const char* what) const {
    throw Error("tracetorch: " + std::string(what) + " " + shown_as_.string() + ": " + std::strerror(errno));
  }

  int directory_;
  std::string name_;
  std::filesystem::path shown_as_;
  publish_detail::UniqueFd fd_;
  off_t old_size_ = 0;
  std::size_t position_ = 0;
  std::size_t buffered_ = 0;
  bool written_over_ = false;
  bool finished_ = false;
  char buffer_[4096];
};

}  // namespace tracetorch::detail
