#pragma once
/// \file
/// Reading the model test files for tracetorch-scan-skipped: which files under the tests
/// directory, and their text through the library's shared check on files read from outside.

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <tracetorch/detail/fs/read_file.hpp>  // read_regular_file, kMaxSourceBytes, FileRefused

#include "common.hpp"

namespace tracetorch::scan_skipped {

namespace fs = std::filesystem;

/// A test file's text: the shared check (a FIFO, socket or device is refused, not opened for
/// reading; at most kMaxSourceBytes), worded as this tool's other errors.
inline std::string read_test_file(const fs::path& path) {
  try {
    return tracetorch::detail::read_regular_file(path, tracetorch::detail::kMaxSourceBytes, "a test file");
  } catch (const tracetorch::detail::FileRefused& e) {
    throw ScanError(path.string() + ": " + e.cause());
  }
}

/// The model test files under `dir`, sorted by path.
inline std::vector<fs::path> model_test_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ScanError(dir.string() + ": no such directory");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Directories are walked, not read; anything else so named is read_test_file's to accept or refuse.
    std::error_code type_ec;  // a dangling link is not a directory: read_test_file says what it is
    if (name.starts_with("test_modeling_") && name.ends_with(".cpp") && !it->is_directory(type_ec)) files.push_back(it->path());
  }
  if (ec) throw ScanError(dir.string() + ": cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tracetorch::scan_skipped
