#pragma once
// Shared by the tests/test_fs_publish_*.cpp files (issue 26, item 1: detail/fs/publish.hpp): scratch
// directories, generations of files written, published and read back whole or not, and forked
// processes that publish while the test reads, waits for or kills them.

#include <doctest/doctest.h>
#include <tracetorch/detail/fs/directory_lock.hpp>
#include <tracetorch/detail/fs/publish.hpp>
#include <tracetorch/detail/fs/staged_directory.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace tracetorch_publish_test {


namespace fs = std::filesystem;
using tracetorch::detail::DirectoryLock;
using tracetorch::detail::LockMode;
using tracetorch::detail::StagedDirectory;

/// A fresh directory under the system temp dir, removed with everything in it at scope end.
class Scratch {
 public:
  Scratch() {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("tracetorch-publish-" + std::to_string(random()) + std::to_string(random()));
    fs::create_directories(path_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    for (const auto& entry : fs::directory_iterator(path_, ignored)) {
      fs::permissions(entry.path(), fs::perms::owner_all, fs::perm_options::add, ignored);
    }
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<missing>";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void put(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

inline std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.insert(entry.path().filename().string());
  return out;
}

inline constexpr int kParts = 6;

/// `<tag>-<i>` for each part: "<tag> <generation>" and a 16 KiB body, so that writing a
/// generation takes long enough for a kill to land in the middle of it.
inline void write_generation(const fs::path& dir, const std::string& tag, long generation) {
  const std::string body(16 * 1024, static_cast<char>('a' + generation % 26));
  for (int i = 0; i < kParts; ++i) put(dir / (tag + "-" + std::to_string(i)), tag + " " + std::to_string(generation) + "\n" + body);
}

/// The generation of `tag`'s parts in `dir`: nullopt where it has none of them; -1 where they
/// are not one whole generation (some missing, or of different generations, or cut short).
inline std::optional<long> generation_of(const fs::path& dir, const std::string& tag) {
  std::optional<long> found;
  int present = 0;
  for (int i = 0; i < kParts; ++i) {
    const std::string text = slurp(dir / (tag + "-" + std::to_string(i)));
    if (text == "<missing>") continue;
    ++present;
    const auto newline = text.find('\n');
    if (newline == std::string::npos || text.size() != newline + 1 + 16 * 1024) return -1;
    const long generation = std::stol(text.substr(tag.size() + 1, newline - tag.size() - 1));
    if (found && *found != generation) return -1;
    found = generation;
  }
  if (present != 0 && present != kParts) return -1;
  return found;
}

/// Writes the generation into a staging directory and publishes it.
inline void publish_generation(const fs::path& debug_path, const std::string& tag, long generation,
                        const tracetorch::detail::CarryOver& carry_over = tracetorch::detail::keep_every_entry) {
  StagedDirectory staged(debug_path);
  write_generation(staged.path(), tag, generation);
  tracetorch::detail::publish(std::move(staged), carry_over);
}

inline void write_text(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

inline std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

/// A forked process running `body(out)`, where `out` is a pipe the test reads. It exits 0 when
/// body returns, 1 (the message written to `out`) when it throws. Never runs the test framework.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

inline Child start_child(const std::function<void(int out)>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      body(fds[1]);
    } catch (const std::exception& error) {
      write_text(fds[1], std::string("child failed: ") + error.what() + "\n");
      code = 1;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

/// Waits for the child (SIGKILL after `limit`): its exit code, or 128 + the signal that ended it.
inline int wait_for(const Child& child, std::chrono::milliseconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child.pid, &status, WNOHANG);
    if (done == child.pid) break;
    if (done < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// What a user keeps in a debug_path besides traces: a file and a directory with a file.
inline void add_user_entries(const fs::path& dbg) {
  fs::create_directories(dbg / "user-dir");
  put(dbg / "user.txt", "the user's");
  put(dbg / "user-dir" / "inner.txt", "inside");
}

}  // namespace tracetorch_publish_test
