// Reliability of the model addition debugger (issue 8): a full disk (a small tmpfs), a file size
// limit (EFBIG) and a debug_path that becomes read-only: a clear error, the previous trace whole;
// and the per-file writer's own errors after a failed write.
// docs/reliability.md lists each case.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "reliability_helpers.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace reliability_test {

namespace {

// ---------------------------------------------------------------------------------------------
// Faults the tests inject

/// A small tmpfs mounted on `dir` (root with CAP_SYS_ADMIN only): writes past its size fail
/// with ENOSPC, a real full disk.
class SmallTmpfs {
 public:
  SmallTmpfs(std::filesystem::path dir, const std::string& size) : dir_(std::move(dir)) {
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

  /// Fills the file system with a ballast file so that about `free_bytes` remain.
  void leave_free(std::uint64_t free_bytes) const {
    std::filesystem::remove(ballast());
    struct statvfs info {};
    if (::statvfs(dir_.c_str(), &info) != 0) throw std::runtime_error("statvfs failed");
    const std::uint64_t available = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
    if (available <= free_bytes) return;
    std::FILE* f = std::fopen(ballast().c_str(), "wb");
    const std::string block(4096, '\0');
    for (std::uint64_t left = available - free_bytes; left > 0;) {
      const auto n = std::min<std::uint64_t>(left, block.size());
      if (std::fwrite(block.data(), 1, n, f) != n) break;
      left -= n;
    }
    std::fclose(f);
  }
  void remove_ballast() const { std::filesystem::remove(ballast()); }
  std::filesystem::path ballast() const { return dir_ / "ballast"; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
};

/// Limits the size of files this process writes (RLIMIT_FSIZE) with SIGXFSZ ignored, so that a
/// write past the limit fails with EFBIG: a full disk that any user can simulate.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

/// Takes CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER out of this thread's effective
/// capabilities (they stay permitted and come back at scope end), so that file permissions
/// bind root too: CI runs as root, where chmod 0555 alone does not stop a write.
class FilePermissionsBindRoot {
 public:
  FilePermissionsBindRoot() {
    header_ = {_LINUX_CAPABILITY_VERSION_3, 0};
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    for (const int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
      reduced[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
    }
    changed_ = ::syscall(SYS_capset, &header_, reduced) == 0;
  }
  FilePermissionsBindRoot(const FilePermissionsBindRoot&) = delete;
  FilePermissionsBindRoot& operator=(const FilePermissionsBindRoot&) = delete;
  ~FilePermissionsBindRoot() {
    if (changed_) ::syscall(SYS_capset, &header_, saved_);
  }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool changed_ = false;
};

/// True when a new file can be created in `dir` (by this thread, with its capabilities).
bool can_create_file_in(const std::filesystem::path& dir) {
  const auto probe = dir / "probe-write";
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

}  // namespace

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// A full disk, a read-only debug_path

/// Runs forwards with input 2 under `fault` settings that range from "fails at the first byte"
/// to "succeeds"; after each, the directory holds either the whole previous trace (input 1),
/// byte for byte, or the whole new one: never a mix, a truncated file or a temporary file.
template <class Fault>
void check_all_or_nothing(const std::filesystem::path& dir, bool use_repr, const std::vector<std::uint64_t>& levels,
                          Fault&& fault, const std::string& expected_error) {
  auto model = make_outer();
  const auto first = trace_files(model, outer_input(), use_repr);
  const auto second = trace_files(model, outer_input(1.0), use_repr);
  const auto parameters = copy_parameters(*model);
  int failed = 0, succeeded = 0;
  for (const auto level : levels) {
    DOCTEST_INFO("use_repr " << use_repr << ", level " << level);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename() != "ballast") std::filesystem::remove_all(entry.path());
    }
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    bool ok = false;
    std::string error;
    {
      auto injected = fault(level);
      try {
        model(outer_input(1.0));
        ok = true;
      } catch (const tracetorch::Error& e) {
        error = e.what();
      }
    }
    auto files = snapshot(dir);
    files.erase("ballast");
    if (ok) {
      ++succeeded;
      DOCTEST_CHECK(files == second);
    } else {
      ++failed;
      DOCTEST_INFO(error);
      DOCTEST_CHECK(error.find(expected_error) != std::string::npos);
      DOCTEST_CHECK(error.find(dir.string()) != std::string::npos);  // names the file
      DOCTEST_CHECK(files == first);
    }
    DOCTEST_CHECK(all_parameters_equal(*model, parameters));
    DOCTEST_CHECK(torch::GradMode::is_enabled());
  }
  DOCTEST_CHECK(failed > 0);
  DOCTEST_CHECK(succeeded > 0);
}

DOCTEST_TEST_CASE("a full disk (a small tmpfs): a clear error, the previous trace whole, nothing truncated") {
  TempDir dir;
  SmallTmpfs tmpfs(dir.path(), "512k");
  if (!tmpfs.mounted()) {
    DOCTEST_MESSAGE("skipped: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN); the file-size-limit test covers this");
    return;
  }
  for (const bool use_repr : {true, false}) {
    std::vector<std::uint64_t> free_levels;
    for (std::uint64_t kib = 0; kib <= 96; kib += 4) free_levels.push_back(kib * 1024);
    check_all_or_nothing(
        dir.path(), use_repr, free_levels,
        [&](std::uint64_t free_bytes) {
          tmpfs.leave_free(free_bytes);
          struct Ballast {
            const SmallTmpfs& fs;
            ~Ballast() { fs.remove_ballast(); }
          };
          return Ballast{tmpfs};
        },
        "No space left on device");
  }
}

DOCTEST_TEST_CASE("a file size limit (EFBIG): a clear error, the previous trace whole, nothing truncated") {
  TempDir dir;
  for (const bool use_repr : {true, false}) {
    check_all_or_nothing(
        dir.path(), use_repr, {0, 1, 8, 100, 200, 1000, 2000, 4096, 5000, 10000, 1 << 20},
        [](std::uint64_t bytes) { return std::make_unique<FileSizeLimit>(bytes); }, "File too large");
  }
}

DOCTEST_TEST_CASE("a debug_path that becomes read-only: a clear error, the previous trace whole, the next trace works") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    const auto first = trace_files(model, outer_input(), use_repr);
    const auto second = trace_files(model, outer_input(1.0), use_repr);
    TempDir dir;
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    {
      std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                                                   std::filesystem::perms::group_read | std::filesystem::perms::group_exec |
                                                   std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
      FilePermissionsBindRoot as_plain_user;
      if (can_create_file_in(dir.path())) {
        DOCTEST_MESSAGE("skipped: file permissions do not bind this process (root without CAP_SETPCAP control?)");
        std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
        return;
      }
      DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(1.0)), doctest::Contains("Permission denied"), tracetorch::Error);
      DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(1.0)), doctest::Contains(dir.path().string().c_str()), tracetorch::Error);
      // And a new scope on it is refused before any forward.
      DOCTEST_CHECK_THROWS_WITH_AS((void)tracetorch::model_addition_debugger(model, {.debug_path = dir.path()}),
                                   doctest::Contains("Permission denied"), tracetorch::Error);
    }
    std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
    DOCTEST_CHECK(snapshot(dir.path()) == first);
    DOCTEST_CHECK(torch::GradMode::is_enabled());
    model(outer_input(1.0));
    DOCTEST_CHECK(snapshot(dir.path()) == second);
  }
}

DOCTEST_TEST_CASE("a file's writer: a write after a failed write names that failure; after finish(), 'already finished'") {
  TempDir dir;
  const int directory = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DOCTEST_REQUIRE(directory >= 0);
  const std::string block(64 * 1024, 'x');  // larger than the writer's buffer: written at once
  {
    tracetorch::detail::StagedFileWriter writer(directory, "failed.bin", dir.path() / "failed.bin");
    {
      FileSizeLimit limit(4096);
      DOCTEST_CHECK_THROWS_WITH_AS(writer.write(block), doctest::Contains("File too large"), tracetorch::Error);
    }
    DOCTEST_CHECK_THROWS_WITH_AS(writer.write("more"), doctest::Contains("failed.bin: an earlier write failed"), tracetorch::Error);
    DOCTEST_CHECK_THROWS_WITH_AS(writer.finish(), doctest::Contains("failed.bin: an earlier write failed"), tracetorch::Error);
  }
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir.path() / "failed.bin"));  // an unfinished writer removes its file
  tracetorch::detail::StagedFileWriter writer(directory, "done.bin", dir.path() / "done.bin");
  writer.write(block);
  writer.finish();
  DOCTEST_CHECK(std::filesystem::file_size(dir.path() / "done.bin") == block.size());
  DOCTEST_CHECK_THROWS_WITH_AS(writer.write("more"), doctest::Contains("done.bin: already finished"), tracetorch::Error);
  ::close(directory);
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
