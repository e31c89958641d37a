#pragma once
/// \file
/// Reading a regular file in pieces at given offsets through stdio, with errors that name the
/// file: the safetensors reader and the checkpoint index read this way.

#include <sys/types.h>  // off_t

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/fs/read_file.hpp"

namespace tracetorch::detail {

/// An open file, closed on scope exit.
struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

/// Opens `path` for reading and returns it with its size: a regular file (read_file.hpp's
/// check, so a FIFO or device is refused before it is opened). No size limit here: the header
/// is at most kSafetensorsMaxHeader bytes and each tensor is read as the checked header says.
inline std::pair<UniqueFile, std::uint64_t> open_for_reading(const std::filesystem::path& path) {
  ReadableFile file = open_regular_file(path, std::numeric_limits<std::uint64_t>::max(), "a safetensors file");
  UniqueFile stream(::fdopen(file.fd(), "rb"));
  if (!stream) throw Error("tracetorch: " + path.string() + ": cannot open: " + std::strerror(errno));
  file.release();  // the stream owns it now
  return {std::move(stream), file.size()};
}

/// Reads exactly `size` bytes at `offset`; a short read means the file changed under us.
inline void read_exactly(std::FILE* file, const std::filesystem::path& path, std::uint64_t offset, void* out,
                         std::uint64_t size) {
  if (size == 0) return;
  if (offset > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) ||
      ::fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0) {
    throw Error("tracetorch: " + path.string() + ": cannot seek to byte " + std::to_string(offset) + ": " +
                std::strerror(errno));
  }
  if (std::fread(out, 1, size, file) != size) {
    const std::string why = std::ferror(file) ? std::strerror(errno) : "the file is shorter than its header says";
    throw Error("tracetorch: " + path.string() + ": cannot read " + std::to_string(size) + " bytes at byte " +
                std::to_string(offset) + ": " + why);
  }
}

}  // namespace tracetorch::detail
