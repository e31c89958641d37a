// The debugger replaces a trace whole (issue 26, item 1; detail/debugger/trace_publish.hpp):
// writer processes killed with SIGKILL at random instants, two writers racing while the diff
// reads, and a failure injected into each step of publishing. docs/reliability.md cites these.

#include "test_helpers.hpp"
#include <tracetorch/diff.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using tracetorch_test::snapshot;
using tracetorch_test::TempDir;
using Snapshot = std::map<std::string, std::string>;

struct PubNetImpl : torch::nn::Module {
  PubNetImpl() {
    torch::manual_seed(26);
    first = register_module("first", tracetorch::nn::Linear(4, 8));
    second = register_module("second", tracetorch::nn::Linear(8, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return second(torch::relu(first(x))); }
  tracetorch::nn::Linear first{nullptr}, second{nullptr};
};
TRACETORCH_TRACEABLE_IMPL(PubNet, PubNetImpl);

/// Generation `g`'s input: every value in the trace differs from one generation to the next.
torch::Tensor input_of(int g) { return torch::full({2, 4}, g / 8.0); }

tracetorch::DebuggerOptions options_for(const fs::path& dir, bool use_repr, bool reuse = true) {
  return {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr, .reuse_previous_files = reuse};
}

/// The trace of generation `g`, traced alone into a fresh directory (cached).
const Snapshot& reference(PubNet& model, int g, bool use_repr) {
  static std::map<std::pair<int, bool>, Snapshot> cache;
  auto& slot = cache[{g, use_repr}];
  if (slot.empty()) {
    TempDir dir;
    {
      auto scope = tracetorch::model_addition_debugger(model, options_for(dir.path(), use_repr, false));
      model(input_of(g));
    }
    slot = snapshot(dir.path());
  }
  return slot;
}

/// `parent`/dbg, holding the user's entries, which every publish keeps.
fs::path debug_path_in(const TempDir& parent) {
  const auto dir = parent / "dbg";
  fs::create_directories(dir);
  std::ofstream(dir / "notes.txt") << "mine";
  fs::create_directories(dir / "keep");
  std::ofstream(dir / "keep" / "x") << "kept";
  return dir;
}
/// The trace in `dir` after checking that the user's entries are intact. Right after a writer
/// was killed between its exchange and moving the user's directory over, that directory is still
/// in the replaced tree beside `dir` (the next publish puts it back): `directory_may_be_away`.
Snapshot trace_in(const fs::path& dir, bool directory_may_be_away = false) {
  auto files = snapshot(dir);
  DOCTEST_CHECK(files["notes.txt"] == "mine");
  if (!directory_may_be_away || fs::exists(dir / "keep")) DOCTEST_CHECK(tracetorch_test::read_file(dir / "keep" / "x") == "kept");
  files.erase("notes.txt");
  files.erase("keep");
  return files;
}

/// A forked process tracing generations first, first + 1, ... (at most `count`, until `stop`
/// exists) into `debug_path` in one scope, writing each generation's number to `out` once its
/// forward returned. Exits 1 (after writing -1) where a forward throws.
pid_t start_writer(PubNet& model, const fs::path& debug_path, int first, int count, bool use_repr, int out,
                   const fs::path& work_dir = {}, const fs::path& stop = {}) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  torch::set_num_threads(1);  // no thread pool in the child: the parent's does not exist here
  int status = 0;
  try {
    if (!work_dir.empty() && ::chdir(work_dir.c_str()) != 0) throw std::runtime_error("chdir");
    auto scope = tracetorch::model_addition_debugger(model, options_for(debug_path, use_repr));
    for (int g = first; g < first + count && (stop.empty() || !fs::exists(stop)); ++g) {
      model(input_of(g));
      if (::write(out, &g, sizeof g) != sizeof g) break;
    }
  } catch (const std::exception& e) {
    const int failed = -1;
    (void)!::write(out, &failed, sizeof failed);
    std::fprintf(stderr, "writer %d: %s\n", static_cast<int>(::getpid()), e.what());
    status = 1;
  }
  ::_exit(status);  // no static destructors: the parent's belong to the parent
}

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { DOCTEST_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~Pipe() { for (const int fd : fds) if (fd >= 0) ::close(fd); }
  /// The generations the writer reported until its end (-1 among them: a forward threw); with
  /// `so_far`, those reported until now, added to `out`.
  std::vector<int> reports(bool so_far = false, std::vector<int> out = {}) {
    if (!so_far) ::close(std::exchange(fds[1], -1));
    pollfd ready{fds[0], POLLIN, 0};
    for (int g = 0; (!so_far || ::poll(&ready, 1, 0) == 1) && ::read(fds[0], &g, sizeof g) == sizeof g;) out.push_back(g);
    return out;
  }
};

/// Kills the writer `pid` (SIGKILL) and returns its reports.
std::vector<int> kill_writer(pid_t pid, Pipe& pipe) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return pipe.reports();
}

/// Starts a writer of generations from `first` and kills it at a random instant: every other
/// round within its first forward (the first trace of a process, which also removes leftovers),
/// else after it reported its first generation (forwards in a loop, spares reused). Returns the
/// generations it reported; `startup` learns how long a first forward takes.
std::vector<int> run_and_kill(PubNet& model, const fs::path& debug_path, int first, bool use_repr, std::mt19937& random,
                              std::chrono::microseconds& startup, const fs::path& work_dir = {}) {
  using namespace std::chrono;
  Pipe pipe;
  const auto start = steady_clock::now();
  const pid_t pid = start_writer(model, debug_path, first, 100000, use_repr, pipe.fds[1], work_dir);
  std::vector<int> reports;
  if (random() % 2 == 0) {
    std::this_thread::sleep_for(microseconds(random() % (startup.count() * 3 / 2 + 1)));
  } else {
    pollfd ready{pipe.fds[0], POLLIN, 0};
    int g = 0;
    if (::poll(&ready, 1, 10000) == 1 && ::read(pipe.fds[0], &g, sizeof g) == sizeof g) reports.push_back(g);
    startup = duration_cast<microseconds>(steady_clock::now() - start);
    std::this_thread::sleep_for(microseconds(random() % 10000));
  }
  for (const int g : kill_writer(pid, pipe)) reports.push_back(g);
  return reports;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.insert(entry.path().filename().string());
  return out;
}

/// One more trace, in this process and a fresh scope: it succeeds, and the leftovers of killed
/// writers beside and inside debug_path are gone.
void next_run_cleans_up(PubNet& model, const TempDir& parent, const fs::path& dir, int g, bool use_repr) {
  {
    auto scope = tracetorch::model_addition_debugger(model, options_for(dir, use_repr, false));
    model(input_of(g));
  }
  DOCTEST_CHECK(trace_in(dir) == reference(model, g, use_repr));
  DOCTEST_CHECK(names_in(parent.path()) == std::set<std::string>{"dbg"});
  for (const auto& name : names_in(dir)) DOCTEST_CHECK_MESSAGE(!name.starts_with(".tracetorch-"), "left in debug_path: " << name);
}

/// Faults for tracetorch::detail::io_fault_injector: the `nth` call of `step` (-1: every call)
/// fails with `error`.
struct Fault { std::string step; int nth; int error; };
std::vector<Fault> injected;
std::map<std::string, int, std::less<>> calls;

int inject(std::string_view step) {
  const int call = calls[std::string(step)]++;
  for (const auto& fault : injected) {
    if (fault.step == step && (fault.nth == call || fault.nth == -1)) return fault.error;
  }
  return 0;
}

struct Injecting {
  explicit Injecting(std::vector<Fault> faults) {
    injected = std::move(faults);
    calls.clear();
    tracetorch::detail::io_fault_injector = &inject;
  }
  ~Injecting() { tracetorch::detail::io_fault_injector = nullptr; }
};

}  // namespace

DOCTEST_TEST_SUITE("trace publish") {

DOCTEST_TEST_CASE("kill -9 at random instants of a process tracing forward after forward: one whole trace, then the next run works") {
  PubNet model;
  std::mt19937 random(2026);
  for (const bool use_repr : {false, true}) {
    DOCTEST_INFO("use_repr " << use_repr);
    TempDir parent;
    const auto dir = debug_path_in(parent);
    int shown = 0, advanced = 0, leftovers = 0, away = 0, rounds = 0;
    std::chrono::microseconds startup(50000);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (; rounds < 150 && std::chrono::steady_clock::now() < deadline; ++rounds) {
      const auto reports = run_and_kill(model, dir, shown + 1, use_repr, random, startup);
      DOCTEST_REQUIRE(std::find(reports.begin(), reports.end(), -1) == reports.end());
      const int last = reports.empty() ? shown : reports.back();
      away += fs::exists(dir / "keep") ? 0 : 1;
      const auto files = trace_in(dir, true);
      int g = files.empty() && shown == 0 ? 0 : -1;
      for (const int candidate : {last, last + 1}) g = candidate > 0 && files == reference(model, candidate, use_repr) ? candidate : g;
      DOCTEST_REQUIRE_MESSAGE(g >= shown, "round " << rounds << ": not one whole trace of generation " << last << " or " << last + 1);
      advanced += g > shown ? 1 : 0;
      leftovers += names_in(parent.path()).size() > 1 ? 1 : 0;
      shown = g;
    }
    DOCTEST_MESSAGE("use_repr " << use_repr << ": " << rounds << " kills, " << advanced << " after a new trace, "
                                << leftovers << " left a staging directory beside debug_path, " << away
                                << " the user's directory in it; a first forward took " << startup.count() << " us");
    DOCTEST_CHECK(rounds >= 20);  // about 100 on the 2-core VM; fewer under the sanitizers
    DOCTEST_CHECK(advanced > 0);
    next_run_cleans_up(model, parent, dir, shown + 1, use_repr);
  }
}

DOCTEST_TEST_CASE("kill -9 of a process tracing into its working directory (file by file): every file whole, next run works") {
  PubNet model;
  std::mt19937 random(26);
  TempDir parent;
  const auto dir = debug_path_in(parent);
  int shown = 0, mixed = 0, rounds = 0;
  std::chrono::microseconds startup(50000);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  for (; rounds < 100 && std::chrono::steady_clock::now() < deadline; ++rounds) {
    const auto reports = run_and_kill(model, ".", shown + 1, false, random, startup, dir);
    DOCTEST_REQUIRE(std::find(reports.begin(), reports.end(), -1) == reports.end());
    const int last = reports.empty() ? shown : reports.back();
    const auto files = trace_in(dir);
    if (files.empty() && shown == 0) continue;
    // The weaker promise: the trace's files, each whole and of generation `last` or the next.
    const auto& older = reference(model, std::max(last, 1), false);
    const auto& newer = reference(model, last + 1, false);
    int from_newer = 0;
    for (const auto& [name, content] : older) {
      DOCTEST_INFO(name);
      DOCTEST_REQUIRE(files.contains(name));
      DOCTEST_REQUIRE((files.at(name) == content || files.at(name) == newer.at(name)));
      from_newer += files.at(name) == newer.at(name) && content != newer.at(name) ? 1 : 0;
    }
    mixed += from_newer > 0 && files != newer ? 1 : 0;
    shown = files == newer ? last + 1 : last;
  }
  DOCTEST_MESSAGE(rounds << " kills, " << mixed << " left a mix of two traces (allowed here)");
  DOCTEST_CHECK(rounds >= 20);
  next_run_cleans_up(model, parent, dir, shown + 1, false);
}

DOCTEST_TEST_CASE("two processes tracing into one debug_path while the diff reads it: whole traces, one killed, the other goes on") {
  PubNet model;
  TempDir parent;
  const auto dir = debug_path_in(parent);
  const auto stop = parent / "stop";  // the first writer ends when this file appears
  Pipe first_out;  // made before the second pipe, whose writing end the first writer must not hold
  const pid_t first = start_writer(model, dir, 1000, 100000, false, first_out.fds[1], {}, stop);
  Pipe second_out;
  pid_t second = start_writer(model, dir, 3000, 100000, false, second_out.fds[1]);
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> reports;
  std::mt19937 random(7);
  int diffs = 0;
  for (; diffs < 12 || reports.size() < 30;) {
    DOCTEST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() - start < std::chrono::seconds(120), diffs << " diffs");
    // Pauses between reads: a reader that reads without a pause holds writers off (see the docs).
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    reports = first_out.reports(true, std::move(reports));
    if (diffs >= 4 && reports.size() >= 10 && second != 0) {
      const auto second_reports = kill_writer(std::exchange(second, 0), second_out);
      DOCTEST_CHECK(std::find(second_reports.begin(), second_reports.end(), -1) == second_reports.end());
    }
    if (!fs::exists(dir / "PubNet_debug_tree_FULL_TENSORS.json")) continue;
    // The diff of the directory with itself reads it twice: under its lock, one trace both times.
    const auto report = tracetorch::diff_traces(dir, dir);
    DOCTEST_CHECK(!report.first_divergence);
    DOCTEST_CHECK(report.missing_calls.empty());
    DOCTEST_CHECK(!report.tensors.empty());
    ++diffs;
    // And what a reader holding the lock sees is one writer's whole trace.
    const tracetorch::detail::DirectoryLock lock(dir, tracetorch::detail::LockMode::shared);
    const auto files = trace_in(dir, true);
    const int g = static_cast<int>(std::lround(
        tracetorch::safetensors::load_single(dir / "PubNet_inputs_args_0.safetensors")[0][0].item<double>() * 8));
    DOCTEST_CHECK(files == reference(model, g, false));
  }
  std::ofstream{stop}.flush();
  int status = 0;
  ::waitpid(first, &status, 0);
  fs::remove(stop);
  reports = first_out.reports(false, std::move(reports));
  DOCTEST_MESSAGE(diffs << " diffs while the first writer traced " << reports.size() << " times");
  DOCTEST_CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));  // every forward of the first writer succeeded
  DOCTEST_REQUIRE(!reports.empty());
  DOCTEST_CHECK(reports.back() == 1000 + static_cast<int>(reports.size()) - 1);
  DOCTEST_CHECK(trace_in(dir) == reference(model, reports.back(), false));
  next_run_cleans_up(model, parent, dir, reports.back() + 1, false);
}

DOCTEST_TEST_CASE("a failure injected into each step of publishing: the previous trace whole and a message naming the path, or the new trace") {
  PubNet model;
  enum Outcome { previous, published, published_user_dir_kept_aside };
  struct Case { std::vector<Fault> faults; std::string message; Outcome outcome; };  // message "": no error
  const auto& files_of_a_trace = reference(model, 1, false);
  std::vector<Case> cases = {
      {{{"lock", 0, EIO}}, "cannot lock ", previous},
      {{{"link", 0, EIO}, {"link", 1, EIO}}, "in the new tree (link: Input/output error, copy: Input/output error); ", previous},
      {{{"link", 0, EPERM}}, "", published},  // no hard links here: the user's file is copied
      {{{"exchange", 0, EIO}}, "cannot exchange ", previous},
      {{{"move out", 0, EACCES}}, "", published},  // the parent cannot take the staging directory: file by file
      {{{"exchange", 0, EINVAL}}, "", published},  // no RENAME_EXCHANGE on this filesystem: file by file
      {{{"move in", 0, EIO}}, "", published},      // the spares are dropped
      {{{"move over", -1, EIO}}, "could not move an entry of the replaced tree into it", published_user_dir_kept_aside},
      {{{"exchange", 0, EINVAL}, {"place", 2, EIO}, {"restore", 0, EIO}}, "putting the previous files back failed too", published},
  };
  for (int k = 0; k < static_cast<int>(files_of_a_trace.size()); ++k) {
    cases.push_back({{{"exchange", 0, EINVAL}, {"place", k, EIO}}, ": Input/output error; ", previous});
  }
  for (const auto& c : cases) {
    DOCTEST_INFO("fault " << c.faults.back().step << " #" << c.faults.back().nth);
    TempDir parent;
    const auto dir = debug_path_in(parent);
    auto scope = tracetorch::model_addition_debugger(model, options_for(dir, false));
    model(input_of(1));
    model(input_of(2));  // this one keeps the first one's files as spares
    std::string message;
    try {
      const Injecting faults(c.faults);
      model(input_of(3));
    } catch (const tracetorch::Error& e) {
      message = e.what();
    }
    DOCTEST_INFO(message);
    DOCTEST_CHECK((c.message.empty() ? message.empty() : message.find(c.message) != std::string::npos));
    if (!c.message.empty()) DOCTEST_CHECK(message.find(dir.string()) != std::string::npos);
    if (c.outcome == published_user_dir_kept_aside) {
      const auto at = message.find("kept as ");
      DOCTEST_REQUIRE(at != std::string::npos);
      const fs::path kept = message.substr(at + 8);
      DOCTEST_CHECK(tracetorch_test::read_file(kept / "keep" / "x") == "kept");
      fs::rename(kept / "keep", dir / "keep");
    }
    if (c.faults.back().step != "restore") {  // after a failed restore the directory holds a mix, as the message says
      DOCTEST_CHECK(trace_in(dir) == reference(model, c.outcome == previous ? 2 : 3, false));
    }
    if (c.faults.back().step == "move in") {
      for (const auto& name : names_in(dir)) DOCTEST_CHECK(!name.starts_with(".tracetorch-spares-"));
    }
    model(input_of(4));  // the next trace works
    DOCTEST_CHECK(trace_in(dir) == reference(model, 4, false));
    for (const auto& name : names_in(parent.path())) if (name != "dbg" && c.outcome == published_user_dir_kept_aside) fs::remove_all(parent / name);
    DOCTEST_CHECK(names_in(parent.path()) == std::set<std::string>{"dbg"});
  }
}

DOCTEST_TEST_CASE("use_repr=true keeps the replaced JSON files as spares, and a debug_path that is a symbolic link stays one") {
  PubNet model;
  TempDir parent;
  const auto dir = parent / "dbg";
  fs::create_directories(dir);
  fs::create_directory_symlink(dir, parent / "link");
  const auto inode = [](const fs::path& path) { struct stat info {}; return ::lstat(path.c_str(), &info) == 0 ? info.st_ino : 0; };
  const auto spares_in = [&] {
    std::vector<std::string> out;
    for (const auto& name : names_in(dir)) if (name.starts_with(".tracetorch-spares-")) out.push_back(name);
    return out;
  };
  const std::string json = "PubNet_debug_tree_FULL_TENSORS.json";
  auto scope = tracetorch::model_addition_debugger(model, options_for(parent / "link", true));
  model(input_of(1));
  DOCTEST_CHECK(spares_in().empty());  // a first trace keeps nothing
  const auto first = inode(dir / json);
  model(input_of(2));
  const auto spares = spares_in();
  DOCTEST_REQUIRE(spares.size() == 1);
  DOCTEST_CHECK(names_in(dir / spares[0]) == std::set<std::string>{json, "PubNet_debug_tree_SUMMARY.json"});
  model(input_of(3));
  DOCTEST_CHECK(inode(dir / json) == first);  // the first trace's file, written over
  DOCTEST_CHECK(snapshot(dir) == reference(model, 3, true));
  DOCTEST_CHECK(fs::is_symlink(parent / "link"));
  DOCTEST_CHECK(names_in(parent.path()) == std::set<std::string>{"dbg", "link"});
}

}  // DOCTEST_TEST_SUITE
