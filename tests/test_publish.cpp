// Whole-tree replacement of a trace directory (issue 26, item 1): detail/io/publish.hpp, with
// real processes killed by SIGKILL at random instants and writers racing one debug_path.
// docs/reliability.md ("A trace is replaced whole") lists each promise and the test that proves it.

#include <doctest/doctest.h>
#include <tracetorch/detail/io/directory_lock.hpp>
#include <tracetorch/detail/io/publish.hpp>
#include <tracetorch/detail/io/staged_directory.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tracetorch_publish_test {
namespace {

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

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<missing>";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.insert(entry.path().filename().string());
  return out;
}

constexpr int kParts = 6;

/// `<tag>-<i>` for each part: "<tag> <generation>" and a 16 KiB body, so that writing a
/// generation takes long enough for a kill to land in the middle of it.
void write_generation(const fs::path& dir, const std::string& tag, long generation) {
  const std::string body(16 * 1024, static_cast<char>('a' + generation % 26));
  for (int i = 0; i < kParts; ++i) put(dir / (tag + "-" + std::to_string(i)), tag + " " + std::to_string(generation) + "\n" + body);
}

/// The generation of `tag`'s parts in `dir`: nullopt where it has none of them; -1 where they
/// are not one whole generation (some missing, or of different generations, or cut short).
std::optional<long> generation_of(const fs::path& dir, const std::string& tag) {
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
void publish_generation(const fs::path& debug_path, const std::string& tag, long generation,
                        const tracetorch::detail::CarryOver& carry_over = tracetorch::detail::keep_every_entry) {
  StagedDirectory staged(debug_path);
  write_generation(staged.path(), tag, generation);
  tracetorch::detail::publish(std::move(staged), carry_over);
}

void write_text(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

/// Reads up to a newline (the child's "ready" line).
std::string read_line(int fd) {
  std::string out;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') out += c;
  return out;
}

/// A forked process running `body(out)`, where `out` is a pipe the test reads. It exits 0 when
/// body returns, 1 (the message written to `out`) when it throws. Never runs the test framework.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child start_child(const std::function<void(int out)>& body) {
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
int wait_for(const Child& child, std::chrono::milliseconds limit = std::chrono::seconds(120)) {
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

/// SIGKILL by pid, then reaped; returns what it wrote that was not read yet.
std::string kill_and_reap(const Child& child) {
  ::kill(child.pid, SIGKILL);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string output = read_all(child.out);
  ::close(child.out);
  return output;
}

/// What a user keeps in a debug_path besides traces: a file and a directory with a file.
void add_user_entries(const fs::path& dbg) {
  fs::create_directories(dbg / "user-dir");
  put(dbg / "user.txt", "the user's");
  put(dbg / "user-dir" / "inner.txt", "inside");
}

bool is_hidden_staging(const std::string& name) { return name.find(".tracetorch-staging-") != std::string::npos; }

DOCTEST_TEST_SUITE("publish") {

DOCTEST_TEST_CASE("kill -9 at random instants of a writer publishing trace after trace: always one whole generation") {
  Scratch root;
  const auto dbg = root / "dbg";
  add_user_entries(dbg);
  publish_generation(dbg, "part", 0);
  long last = 0;
  int advanced = 0, directory_in_flight = 0, leftovers_seen = 0;
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    DOCTEST_INFO("round " << round);
    const long first = last + 1;
    const Child writer = start_child([&](int out) {
      for (long generation = first;; ++generation) {
        publish_generation(dbg, "part", generation);
        write_text(out, "p");
      }
    });
    // Every other round, the kill comes after the writer's first publish: into its steady state.
    char published = 0;
    if (round % 2 == 1) DOCTEST_REQUIRE(::read(writer.out, &published, 1) == 1);
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 25000)(random)));
    const std::string output = kill_and_reap(writer);
    DOCTEST_CHECK_MESSAGE(output.find("child failed") == std::string::npos, output);  // every publish it finished succeeded

    // Exactly one whole generation, never older than the last one, never missing.
    const auto seen = generation_of(dbg, "part");
    DOCTEST_REQUIRE(seen.has_value());
    DOCTEST_REQUIRE(*seen >= last);
    advanced += *seen > last ? 1 : 0;
    DOCTEST_CHECK(slurp(dbg / "user.txt") == "the user's");
    auto names = names_in(dbg);
    // The user's directory moves over right after the exchange: a kill between the two leaves it
    // in the replaced tree, and the next publish puts it back (checked below).
    if (!names.contains("user-dir")) ++directory_in_flight;
    names.erase("user-dir");
    std::set<std::string> expected{"user.txt"};
    for (int i = 0; i < kParts; ++i) expected.insert("part-" + std::to_string(i));
    DOCTEST_CHECK(names == expected);
    for (const auto& name : names_in(root.path())) leftovers_seen += is_hidden_staging(name) ? 1 : 0;

    // The next publish succeeds and removes what the killed one left.
    publish_generation(dbg, "part", *seen + 1);
    DOCTEST_CHECK(generation_of(dbg, "part") == *seen + 1);
    DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
    expected.insert("user-dir");
    DOCTEST_CHECK(names_in(dbg) == expected);
    DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
    last = *seen + 1;
  }
  DOCTEST_MESSAGE("50 kills: " << advanced << " after the writer had published; " << leftovers_seen
                               << " staging directories left behind and removed; " << directory_in_flight
                               << " between exchange and the move of the user's directory");
  DOCTEST_CHECK(advanced > 0);
}

DOCTEST_TEST_CASE("two processes publishing into one debug_path at once: a reader sees whole generations, no update lost") {
  Scratch root;
  const auto started = std::chrono::steady_clock::now();
  const auto dbg = root / "dbg";  // does not exist: both writers race the first publish
  constexpr long kGenerations = 120;
  int go[2];
  DOCTEST_REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
  std::vector<Child> writers;
  for (const std::string tag : {"A", "B"}) {
    writers.push_back(start_child([&, tag](int) {
      ::close(go[1]);
      char c;
      while (::read(go[0], &c, 1) > 0) {
      }
      // Each writer is one model: it replaces its own files and keeps the other's.
      const auto not_mine = [tag](std::string_view name) { return !name.starts_with(tag + "-"); };
      for (long generation = 1; generation <= kGenerations; ++generation) publish_generation(dbg, tag, generation, not_mine);
    }));
  }
  ::close(go[0]);
  ::close(go[1]);  // both start now

  std::map<std::string, long> latest{{"A", 0}, {"B", 0}};
  int observations = 0, failures = 0;
  std::vector<int> codes(writers.size(), -2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    bool running = false;
    for (std::size_t i = 0; i < writers.size(); ++i) {
      int status = 0;
      if (codes[i] == -2 && ::waitpid(writers[i].pid, &status, WNOHANG) == writers[i].pid) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      running |= codes[i] == -2;
    }
    if (!running) break;
    if (auto lock = DirectoryLock::if_exists(dbg, LockMode::shared)) {
      ++observations;
      for (const std::string tag : {"A", "B"}) {
        const auto seen = generation_of(dbg, tag);
        if (!seen) continue;  // that writer has not published yet
        if (*seen < latest[tag]) ++failures;
        latest[tag] = std::max(latest[tag], *seen);
      }
      std::set<std::string> names = names_in(dbg);
      for (const auto& name : names) failures += name.size() == 3 && (name[0] == 'A' || name[0] == 'B') ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  for (std::size_t i = 0; i < writers.size(); ++i) {
    if (codes[i] == -2) codes[i] = wait_for(writers[i], std::chrono::milliseconds(1));
    const std::string output = read_all(writers[i].out);
    ::close(writers[i].out);
    DOCTEST_INFO("writer output: " << output);
    DOCTEST_CHECK(codes[i] == 0);
    DOCTEST_CHECK(output.find("File exists") == std::string::npos);
  }
  DOCTEST_MESSAGE(observations << " observations under the shared lock while 2 x " << kGenerations << " publishes ran ("
                                << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s)");
  DOCTEST_CHECK(observations > 0);
  DOCTEST_CHECK(failures == 0);
  // Neither writer's last trace was lost to the other's exchange.
  DOCTEST_CHECK(generation_of(dbg, "A") == kGenerations);
  DOCTEST_CHECK(generation_of(dbg, "B") == kGenerations);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("other entries of debug_path survive a publish - a predicate drops the replaced model's stale files") {
  Scratch root;
  const auto dbg = root / "dbg";
  add_user_entries(dbg);
  fs::create_symlink("user.txt", dbg / "link");
  put(dbg / "Other_debug_tree_SUMMARY.json", "other model");
  put(dbg / "M_debug_tree_SUMMARY.json", "old");
  put(dbg / "M.stale_inputs_args_0.safetensors", "stale");
  fs::permissions(dbg, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  struct stat user_before {};
  DOCTEST_REQUIRE(::stat((dbg / "user.txt").c_str(), &user_before) == 0);

  std::optional<StagedDirectory> replaced;
  {
    StagedDirectory staged(dbg);
    put(staged.path() / "M_debug_tree_SUMMARY.json", "new");
    put(staged.path() / "M.fresh_inputs_args_0.safetensors", "fresh");
    replaced = tracetorch::detail::publish(std::move(staged));
  }
  // Everything but the replaced file stays, the stale file of M too (the debugger's behaviour).
  DOCTEST_CHECK(names_in(dbg) == std::set<std::string>{"M.fresh_inputs_args_0.safetensors", "M.stale_inputs_args_0.safetensors",
                                                      "M_debug_tree_SUMMARY.json", "Other_debug_tree_SUMMARY.json", "link",
                                                      "user-dir", "user.txt"});
  DOCTEST_CHECK(slurp(dbg / "M_debug_tree_SUMMARY.json") == "new");
  DOCTEST_CHECK(slurp(dbg / "user.txt") == "the user's");
  DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
  DOCTEST_CHECK(slurp(dbg / "Other_debug_tree_SUMMARY.json") == "other model");
  DOCTEST_CHECK(fs::is_symlink(dbg / "link"));
  DOCTEST_CHECK(fs::read_symlink(dbg / "link") == "user.txt");
  struct stat user_after {}, dir_after {};
  DOCTEST_REQUIRE(::stat((dbg / "user.txt").c_str(), &user_after) == 0);
  DOCTEST_CHECK(user_after.st_ino == user_before.st_ino);  // the same file (a link), not a copy
  DOCTEST_REQUIRE(::stat(dbg.c_str(), &dir_after) == 0);
  DOCTEST_CHECK((dir_after.st_mode & 07777) == 0750);  // the replaced directory's permissions
  // The replaced tree holds what the new one replaced, and goes when dropped.
  DOCTEST_REQUIRE(replaced.has_value());
  DOCTEST_CHECK(replaced->path().parent_path() == fs::absolute(root.path()));
  DOCTEST_CHECK(names_in(replaced->path()) == std::set<std::string>{"M_debug_tree_SUMMARY.json"});
  DOCTEST_CHECK(slurp(replaced->path() / "M_debug_tree_SUMMARY.json") == "old");
  replaced.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});

  // A predicate that refuses M's files: its stale and replaced files go, nothing else does.
  {
    StagedDirectory staged(dbg);
    put(staged.path() / "M_debug_tree_SUMMARY.json", "newer");
    const auto not_m = [](std::string_view name) { return !name.starts_with("M.") && !name.starts_with("M_"); };
    replaced = tracetorch::detail::publish(std::move(staged), not_m);
  }
  DOCTEST_CHECK(names_in(dbg) == std::set<std::string>{"M_debug_tree_SUMMARY.json", "Other_debug_tree_SUMMARY.json", "link",
                                                      "user-dir", "user.txt"});
  DOCTEST_CHECK(names_in(replaced->path()) == std::set<std::string>{"M.fresh_inputs_args_0.safetensors",
                                                                   "M.stale_inputs_args_0.safetensors", "M_debug_tree_SUMMARY.json"});
  replaced.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("the replaced tree can be kept (spares) and staged again - while kept, other publishes leave it alone") {
  Scratch root;
  const auto dbg = root / "dbg";
  add_user_entries(dbg);
  publish_generation(dbg, "part", 1);
  auto spares = [&] {
    StagedDirectory staged(dbg);
    write_generation(staged.path(), "part", 2);
    return tracetorch::detail::publish(std::move(staged));
  }();
  DOCTEST_REQUIRE(spares.has_value());
  DOCTEST_CHECK(generation_of(spares->path(), "part") == 1);  // the replaced files only
  DOCTEST_CHECK(names_in(spares->path()).size() == static_cast<std::size_t>(kParts));
  publish_generation(dbg, "other", 1);  // another publish: the kept tree is locked, not abandoned
  DOCTEST_CHECK(generation_of(spares->path(), "part") == 1);
  // Written over in place and published: the tree it replaces becomes the next spares.
  write_generation(spares->path(), "part", 3);
  auto next = tracetorch::detail::publish(std::move(*spares));
  DOCTEST_CHECK(generation_of(dbg, "part") == 3);
  DOCTEST_CHECK(generation_of(dbg, "other") == 1);
  DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
  DOCTEST_REQUIRE(next.has_value());
  DOCTEST_CHECK(generation_of(next->path(), "part") == 2);
  next.reset();
  spares.reset();
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("two threads publishing into one debug_path: serialized, neither update lost") {
  Scratch root;
  const auto dbg = root / "dbg";
  constexpr long kGenerations = 25;
  std::vector<std::string> errors(2);
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      const std::string tag = w == 0 ? "A" : "B";
      try {
        const auto not_mine = [tag](std::string_view name) { return !name.starts_with(tag + "-"); };
        for (long generation = 1; generation <= kGenerations; ++generation) publish_generation(dbg, tag, generation, not_mine);
      } catch (const std::exception& error) {
        errors[w] = error.what();
      }
    });
  }
  for (auto& writer : writers) writer.join();
  DOCTEST_CHECK(errors[0] == "");
  DOCTEST_CHECK(errors[1] == "");
  DOCTEST_CHECK(generation_of(dbg, "A") == kGenerations);
  DOCTEST_CHECK(generation_of(dbg, "B") == kGenerations);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("a staging directory of a killed run is removed by the next publish, a live writer's is not") {
  Scratch root;
  const auto dbg = root / "dbg";
  publish_generation(dbg, "part", 1);
  const auto stage_and_wait = [&](int out) {
    StagedDirectory staged(dbg);
    write_generation(staged.path(), "part", 99);
    write_text(out, staged.path().string() + "\n");
    for (;;) ::pause();
  };
  const Child killed = start_child(stage_and_wait);
  const fs::path stale = read_line(killed.out);
  kill_and_reap(killed);
  const Child live = start_child(stage_and_wait);
  const fs::path alive = read_line(live.out);
  DOCTEST_REQUIRE(fs::is_directory(stale));
  DOCTEST_REQUIRE(fs::is_directory(alive));
  // A leftover of a killed publish between its exchange and its moves: the replaced tree with a
  // directory of the user's it had not moved back yet (made here by hand: nobody locks it).
  const auto retired = root / ".dbg.tracetorch-staging-1-0123456789abcdef";
  fs::create_directories(retired / "user-dir");
  put(retired / "user-dir" / "inner.txt", "inside");
  put(retired / "part-0", "old");
  // Another target's leftover in the same parent is not this publish's to remove.
  const auto other = root / ".other.tracetorch-staging-1-0123456789abcdef";
  fs::create_directories(other);

  publish_generation(dbg, "part", 2);
  DOCTEST_CHECK_FALSE(fs::exists(stale));
  DOCTEST_CHECK_FALSE(fs::exists(retired));
  DOCTEST_CHECK(fs::is_directory(alive));
  DOCTEST_CHECK(generation_of(alive, "part") == 99);
  DOCTEST_CHECK(fs::exists(other));
  DOCTEST_CHECK(slurp(dbg / "user-dir" / "inner.txt") == "inside");
  DOCTEST_CHECK(generation_of(dbg, "part") == 2);

  kill_and_reap(live);
  publish_generation(dbg, "part", 3);
  DOCTEST_CHECK_FALSE(fs::exists(alive));
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg", other.filename().string()});
}

DOCTEST_TEST_CASE("publish errors name the path: a symbolic link, a regular file, an unwritable or missing parent") {
  Scratch root;
  fs::create_directories(root / "real");
  put(root / "real" / "kept", "kept");
  fs::create_symlink("real", root / "dbg-link");
  const auto link = fs::absolute(root / "dbg-link").string();
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::publish(StagedDirectory(root / "dbg-link")),
                               doctest::Contains((link + ": it is a symbolic link").c_str()), tracetorch::Error);
  DOCTEST_CHECK(names_in(root / "real") == std::set<std::string>{"kept"});

  put(root / "file", "a file");
  const auto file = fs::absolute(root / "file").string();
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::publish(StagedDirectory(root / "file")),
                               doctest::Contains((file + ": not a directory").c_str()), tracetorch::Error);
  DOCTEST_CHECK(slurp(root / "file") == "a file");

  const auto missing = fs::absolute(root / "no" / "dbg").string();
  DOCTEST_CHECK_THROWS_WITH_AS(StagedDirectory(root / "no" / "dbg"), doctest::Contains(missing.c_str()), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(StagedDirectory(root / "no" / "dbg"), doctest::Contains("No such file or directory"),
                               tracetorch::Error);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg-link", "file", "real"});

  // Unwritable parent: in a child that, as root, becomes nobody so that permissions bind.
  fs::create_directories(root / "ro" / "dbg");
  fs::permissions(root / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                   fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const auto ro_target = fs::absolute(root / "ro" / "dbg").string();
  const Child child = start_child([&](int out) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      write_text(out, "skipped: cannot become nobody");
      return;
    }
    try {
      StagedDirectory staged(ro_target);
      write_text(out, "no error");
    } catch (const tracetorch::Error& error) {
      write_text(out, error.what());
    }
  });
  const std::string message = read_all(child.out);
  ::close(child.out);
  DOCTEST_CHECK(wait_for(child) == 0);
  if (message.starts_with("skipped")) {
    DOCTEST_MESSAGE(message);
  } else {
    DOCTEST_CHECK(message.find(ro_target) != std::string::npos);
    DOCTEST_CHECK(message.find("Permission denied") != std::string::npos);
  }
  DOCTEST_CHECK(names_in(root / "ro") == std::set<std::string>{"dbg"});
}

DOCTEST_TEST_CASE("publish refuses the process's working directory and waits for a lock at most its timeout") {
  Scratch root;
  const auto dbg = root / "dbg";
  publish_generation(dbg, "part", 1);
  const Child child = start_child([&](int out) {
    if (::chdir(dbg.c_str()) != 0) throw std::runtime_error("chdir failed");
    StagedDirectory staged(".");
    write_generation(staged.path(), "part", 2);
    try {
      tracetorch::detail::publish(std::move(staged));
      write_text(out, "published");
    } catch (const tracetorch::detail::CannotExchange& error) {
      write_text(out, error.what());
    }
  });
  const std::string message = read_all(child.out);
  ::close(child.out);
  DOCTEST_CHECK(wait_for(child) == 0);
  DOCTEST_CHECK(message.find(fs::absolute(dbg).string() + ": it is this process's working directory") != std::string::npos);
  DOCTEST_CHECK(generation_of(dbg, "part") == 1);
  DOCTEST_CHECK(names_in(root.path()) == std::set<std::string>{"dbg"});

  // Another holder (another open: a thread of this process counts as another holder too).
  DirectoryLock held(dbg, LockMode::exclusive);
  const auto started = std::chrono::steady_clock::now();
  DOCTEST_CHECK_THROWS_WITH_AS(DirectoryLock(dbg, LockMode::shared, std::chrono::milliseconds(50)),
                               doctest::Contains((fs::absolute(dbg).string() + ": another process or thread held it for 50 ms").c_str()),
                               tracetorch::Error);
  DOCTEST_CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

}  // DOCTEST_TEST_SUITE

}  // namespace
}  // namespace tracetorch_publish_test
