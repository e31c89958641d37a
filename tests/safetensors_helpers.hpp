#pragma once
// Shared by the safetensors test files (test_safetensors.cpp, test_safetensors_reader.cpp): a
// temporary directory, raw file bytes, and the check that a malformed file is refused with a
// tracetorch::Error naming the file and the cause.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "tracetorch/safetensors.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tracetorch_test::safetensors_files {

namespace fs = std::filesystem;
namespace st = tracetorch::safetensors;

inline const fs::path kData = TRACETORCH_TEST_DATA;
inline const fs::path kTinyLlama = kData / "tiny_llama";

/// A fresh directory under the system temp dir, removed with everything in it on scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tracetorch_safetensors_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), {})); }

 private:
  fs::path path_;
};

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string u64_le(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
  return out;
}

/// A file: length prefix, `header` verbatim (no padding), then `data`.
inline std::string file_bytes(const std::string& header, const std::string& data = {}) {
  return u64_le(header.size()) + header + data;
}

/// The message of the tracetorch::Error `f` throws, or "" (and a failed check) if it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tracetorch::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    DOCTEST_FAIL_CHECK("threw a non-tracetorch exception: " << e.what());
    return {};
  }
  DOCTEST_FAIL_CHECK("did not throw");
  return {};
}

/// Writes `bytes` to a file, opens it with Reader, and checks the refusal names the file and `cause`.
inline void check_refused(const TempDir& dir, const std::string& bytes, const std::string& cause) {
  const auto path = dir / "bad.safetensors";
  write_bytes(path, bytes);
  const std::string message = error_of([&] { st::Reader reader(path); });
  DOCTEST_INFO("message: " << message);
  DOCTEST_CHECK(message.rfind("tracetorch: " + path.string() + ": ", 0) == 0);
  DOCTEST_CHECK(message.find(cause) != std::string::npos);
  // The pure parser agrees with the Reader.
  const std::string pure = error_of([&] {
    st::parse_header({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, bytes.size(), "mem");
  });
  DOCTEST_CHECK(pure.find(cause) != std::string::npos);
}

/// A header holding one F32 [2, 3] tensor "x" with the given entry fields, plus its 24 data bytes.
inline std::string one_entry(const std::string& fields, const std::string& data = std::string(24, '\0')) {
  return file_bytes("{\"x\":{" + fields + "}}", data);
}

inline bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a.cpu(), b.cpu());
}

}  // namespace tracetorch_test::safetensors_files
