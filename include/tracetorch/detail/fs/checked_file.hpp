#pragma once
/// \file
/// CheckedFile: AtomicFileWriter's writing end, through stdio. Every failure
/// throws tracetorch::Error naming the file as the user knows it and the cause.

#include <unistd.h>  // ftruncate

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// Owns a FILE* open for writing. Errors name `shown_as` (a final path, not a temporary name).
class CheckedFile {
 public:
  explicit CheckedFile(std::filesystem::path shown_as) : shown_as_(std::move(shown_as)) {}
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;
  ~CheckedFile() {
    if (file_ != nullptr) std::fclose(file_);
  }

  /// Takes ownership of `file`, or fails with "cannot create" (and errno's cause) when it is null.
  void adopt(std::FILE* file) {
    file_ = file;
    if (file_ == nullptr) fail("cannot create");
  }

  void write(const void* data, std::size_t size) {
    if (file_ == nullptr) throw Error("tracetorch: cannot write " + shown_as_.string() + ": already finished");
    if (size != 0 && std::fwrite(data, 1, size, file_) != size) fail("cannot write");
  }
  void write(std::string_view text) { write(text.data(), text.size()); }

  /// Flushes and closes the file; `cut_at_end`: the file was written over an older one, whose
  /// bytes beyond the new end go. Returns at once when already closed.
  void close(bool cut_at_end = false) {
    if (closed_) return;
    if (file_ == nullptr) throw Error("tracetorch: cannot write " + shown_as_.string() + ": an earlier write failed");
    // fflush + fclose report a full disk that buffered fwrite calls did not.
    bool flushed = std::fflush(file_) == 0;
    if (flushed && cut_at_end) flushed = ::ftruncate(::fileno(file_), ::ftello(file_)) == 0;
    const int saved_errno = errno;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!flushed || !closed) {
      errno = flushed ? errno : saved_errno;
      fail("cannot write");
    }
    closed_ = true;
  }

  bool closed() const { return closed_; }
  const std::filesystem::path& shown_as() const { return shown_as_; }

  [[noreturn]] void fail(const char* what) const {
    throw Error("tracetorch: " + std::string(what) + " " + shown_as_.string() + ": " + std::strerror(errno));
  }

 private:
  std::filesystem::path shown_as_;
  std::FILE* file_ = nullptr;
  bool closed_ = false;
};

}  // namespace tracetorch::detail
