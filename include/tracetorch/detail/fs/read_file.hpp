#pragma once
// Opening files that come from outside (weights, input ids, configs, traces, the scanner's test
// files): one check shared by every reader, so that each refuses the same things the same way.
// A FIFO, socket or device is refused before it is opened for reading (opening a FIFO blocks
// until a writer comes; a device can be read without end), a directory gets its own message,
// and every read is bounded by a limit the caller states. Messages name the file and the cause,
// never anything read from it. No LibTorch here: the trace reader and its fuzzer use it too.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// Read limits, stated in docs/reliability.md ("Reading files").
inline constexpr std::uint64_t kMaxTraceJsonBytes = std::uint64_t(1) << 30;  ///< a trace JSON file: 1 GiB
inline constexpr std::uint64_t kMaxConfigBytes = std::uint64_t(16) << 20;    ///< a config.json: 16 MiB
inline constexpr std::uint64_t kMaxSourceBytes = std::uint64_t(64) << 20;    ///< a scanned test file: 64 MiB

/// A file refused before reading: `path` and `cause` apart, so that a tool can word the line
/// its own way; what() is "tracetorch: <path>: <cause>".
class FileRefused : public Error {
 public:
  FileRefused(std::filesystem::path path, std::string cause)
      : Error("tracetorch: " + path.string() + ": " + cause), path_(std::move(path)), cause_(std::move(cause)) {}
  const std::filesystem::path& path() const { return path_; }
  const std::string& cause() const { return cause_; }

 private:
  std::filesystem::path path_;
  std::string cause_;
};

/// What kind of file `mode` is, as a message says it, or empty for a regular file.
inline std::string not_a_regular_file(mode_t mode) {
  if (S_ISREG(mode)) return {};
  if (S_ISDIR(mode)) return "is a directory, not a file";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe), not a regular file: refused, reading it could wait forever";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file: refused";
  if (S_ISCHR(mode)) return "is a character device, not a regular file: refused";
  if (S_ISBLK(mode)) return "is a block device, not a regular file: refused";
  return "is not a regular file: refused";
}

/// A file descriptor open for reading, closed on scope exit, with the file's size at open.
class ReadableFile {
 public:
  ReadableFile() = default;
  ReadableFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
  ReadableFile(ReadableFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}
  ReadableFile& operator=(ReadableFile&& other) noexcept {
    std::swap(fd_, other.fd_);
    size_ = other.size_;
    return *this;
  }
  ~ReadableFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  std::uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Opens `path` for reading if it is a regular file of at most `max_bytes` (`what` names the
/// kind in the message: "a trace JSON file"); else throws FileRefused. The type is checked
/// before the open (stat) and again on the open file (fstat), and the open is non-blocking,
/// so a FIFO put in its place between the two is refused too, without waiting for a writer.
inline ReadableFile open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw FileRefused(path, std::string("cannot open: ") + std::strerror(errno));
  if (auto why = not_a_regular_file(info.st_mode); !why.empty()) throw FileRefused(path, why);
  ReadableFile file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), 0);
  if (file.fd() < 0) throw FileRefused(path, std::string("cannot open: ") + std::strerror(errno));
  if (::fstat(file.fd(), &info) != 0) throw FileRefused(path, std::string("cannot stat: ") + std::strerror(errno));
  if (auto why = not_a_regular_file(info.st_mode); !why.empty()) throw FileRefused(path, why);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes) {
    throw FileRefused(path, "is " + std::to_string(size) + " bytes, more than the limit of " + std::to_string(max_bytes) +
                                " bytes for " + std::string(what));
  }
  return {file.release(), size};
}

/// The whole of a regular file of at most `max_bytes` (see open_regular_file). Reads the size
/// it had when opened and no more, so a file that grows meanwhile cannot make it read without
/// bound; one that shrinks is an error.
inline std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
  const ReadableFile file = open_regular_file(path, max_bytes, what);
  std::string text(static_cast<std::size_t>(file.size()), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FileRefused(path, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) throw FileRefused(path, "cannot read: the file became shorter while it was read");
    done += static_cast<std::size_t>(n);
  }
  return text;
}

/// Whether `path` lies inside `dir`, both made canonical (symbolic links resolved). Checked for
/// a file named inside a trace directory: a symbolic link there may point within the directory,
/// never out of it. A missing file is left to the open that follows to report.
inline void refuse_link_out_of(const std::filesystem::path& dir, const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec))) return;
  const auto target = std::filesystem::canonical(path, ec);
  if (ec) throw FileRefused(path, "is a symbolic link that cannot be resolved: not followed");
  const auto base = std::filesystem::canonical(dir, ec);
  const auto inside = !ec && target.parent_path() == base;
  if (!inside) throw FileRefused(path, "is a symbolic link out of the trace directory: not followed");
}

}  // namespace tracetorch::detail
