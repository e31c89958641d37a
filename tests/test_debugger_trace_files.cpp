// tracetorch/debugger.hpp's reuse_previous_files (detail/debugger/trace_files.hpp, spare_files.hpp):
// a later trace into the same debug_path writes over the files the one before it replaced, never
// over one still open or linked elsewhere, and reads as a fresh trace; another process opening a
// spare, or a FIFO among them, neither kills nor stops the trace; a forked child's trace leaves the
// parent's spares alone.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "llama/llama.hpp"
#include "publish_helpers.hpp"
#include "test_helpers.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using tracetorch_publish_test::read_all;
using tracetorch_publish_test::start_child;
using tracetorch_publish_test::wait_for;
using tracetorch_publish_test::write_text;
using tracetorch_test::inode_of;
using tracetorch_test::make_tiny_llama;
using tracetorch_test::read_file;
using tracetorch_test::TempDir;
using tracetorch_test::tiny_input_ids;

/// The hidden directories of reuse_previous_files in `dir`.
std::vector<std::string> spare_directories(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(".tracetorch-spares-")) out.push_back(name);
  }
  return out;
}

/// The tensor files of a trace with one link, by name.
std::map<std::string, ino_t> unlinked_tensor_files(const std::filesystem::path& dir) {
  std::map<std::string, ino_t> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    struct stat info {};
    const auto name = entry.path().filename().string();
    if (name.ends_with(".safetensors") && ::lstat(entry.path().c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        info.st_nlink == 1) {
      out[name] = info.st_ino;
    }
  }
  return out;
}

/// The inodes of a trace's tensor files: one per distinct file (a repeated tensor's files are
/// hard links to one).
std::set<ino_t> tensor_inodes(const std::filesystem::path& dir) {
  std::set<ino_t> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") out.insert(inode_of(entry.path()));
  }
  return out;
}

/// Traces the tiny Llama on `ids` into `dir` with use_repr=false, in a scope of its own.
void trace_files(llama::LlamaModel& model, const std::filesystem::path& dir, const torch::Tensor& ids, bool reuse_previous) {
  auto guard = tracetorch::model_addition_debugger(
      model, {.debug_path = dir, .do_prune_layers = false, .use_repr = false, .reuse_previous_files = reuse_previous});
  model({.input_ids = ids});
}

/// Three different inputs of the tiny Llama.
std::vector<torch::Tensor> three_inputs() {
  const auto ids = tiny_input_ids();
  return {ids, ids.flip(1).contiguous(), ids.roll(3, 1).contiguous()};
}

/// How a child of start_child ended: its exit code (128 + the signal that ended it) and what it
/// wrote, and both in words for a failure message.
struct ChildEnd {
  int code;
  std::string output;
  std::string described() const {
    const std::string how = code > 128 ? "killed by signal " + std::to_string(code - 128) + " (" + ::strsignal(code - 128) + ")"
                                       : "exit " + std::to_string(code);
    return how + (output.empty() ? std::string() : ": " + output);
  }
};

/// Waits for `child` (killed by its pid after `limit`) and reads what it wrote.
ChildEnd end_of(const tracetorch_publish_test::Child& child, std::chrono::seconds limit) {
  ChildEnd end{wait_for(child, limit), read_all(child.out)};
  ::close(child.out);
  return end;
}

/// In a child: traces `ids` afresh into `fresh` and throws where `dir`'s trace differs from it
/// (`dir`'s entries named in `besides` left out).
void require_fresh_trace(llama::LlamaModel& model, const std::filesystem::path& dir, const std::filesystem::path& fresh,
                         const torch::Tensor& ids, const std::string& besides = "") {
  trace_files(model, fresh, ids, false);
  auto traced = tracetorch_test::snapshot(dir);
  traced.erase(besides);
  if (traced != tracetorch_test::snapshot(fresh)) throw std::runtime_error("the trace differs from a fresh one");
}

/// The lease test's hook ("lease held"): for the first few spares, another process opens the
/// file while the write lease on it is held, and the hook waits (at most 5 s) until the kernel has
/// begun to break the lease, which is when it signals the holder.
struct LeaseBreaks {
  int hooked = 0;  // leases held
  int broken = 0;  // breaks seen begun
  std::vector<pid_t> openers;
};
LeaseBreaks g_lease_breaks;

int open_the_leased_file(std::string_view step) {
  if (step != "lease held" || ++g_lease_breaks.hooked > 4) return 0;
  int leased = -1;
  for (int fd = 0; fd < 4096 && leased < 0; ++fd) {
    if (::fcntl(fd, F_GETLEASE) == F_WRLCK) leased = fd;
  }
  if (leased < 0) return 0;
  char path[64];  // made before fork: the child of a threaded process calls only open and _exit
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", leased);
  const pid_t opener = ::fork();
  if (opener == 0) ::_exit(::open(path, O_RDONLY) >= 0 ? 0 : 1);  // a new open of the file: a lease breaker
  if (opener < 0) return 0;
  g_lease_breaks.openers.push_back(opener);
  for (int waited = 0; waited < 5000 && ::fcntl(leased, F_GETLEASE) == F_WRLCK; ++waited) ::usleep(1000);
  if (::fcntl(leased, F_GETLEASE) != F_WRLCK) ++g_lease_breaks.broken;
  return 0;
}

}  // namespace

DOCTEST_TEST_SUITE("debugger") {

DOCTEST_TEST_CASE("reuse_previous_files: later traces write over the files they replace and read as fresh ones") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir reused, fresh;
  trace_files(model, reused.path(), inputs[0], true);
  DOCTEST_CHECK(spare_directories(reused.path()).empty());  // a first trace into a directory keeps nothing
  const auto first = unlinked_tensor_files(reused.path());
  DOCTEST_CHECK(first.size() > 30);
  const auto first_inodes = tensor_inodes(reused.path());
  DOCTEST_CHECK(first_inodes.size() < 142);  // repeated tensors are links

  trace_files(model, reused.path(), inputs[1], true);
  const auto spares = spare_directories(reused.path());
  DOCTEST_REQUIRE(spares.size() == 1);
  // The first trace's tensor files, one name each: the names that are links in the second trace
  // are not kept, so that the files they linked to can be written over.
  DOCTEST_CHECK(tracetorch_test::count_files(reused / spares[0]) == first_inodes.size());

  trace_files(model, reused.path(), inputs[2], true);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(spare_directories(fresh.path()).empty());
  DOCTEST_CHECK(tracetorch_test::snapshot(reused.path()) == tracetorch_test::snapshot(fresh.path()));
  // The third trace wrote over the first one's files: those of one link have their inodes again.
  std::size_t written_over = 0;
  for (const auto& [name, inode] : first) written_over += inode_of(reused / name) == inode ? 1 : 0;
  DOCTEST_CHECK(written_over == first.size());
  // Every distinct file of the first trace was written over, those with links included: no file
  // was made anew.
  DOCTEST_CHECK(tensor_inodes(reused.path()) == first_inodes);
  DOCTEST_CHECK(tracetorch_test::count_files(reused / spares[0]) == first_inodes.size());  // the second trace's
}

DOCTEST_TEST_CASE("reuse_previous_files: a replaced file still open or linked elsewhere is never written over") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, elsewhere, fresh;
  trace_files(model, dir.path(), inputs[0], true);
  const auto files = unlinked_tensor_files(dir.path());
  DOCTEST_REQUIRE(files.size() >= 2);
  const std::string open_name = files.begin()->first, linked_name = std::next(files.begin())->first;
  const std::string open_before = read_file(dir / open_name), linked_before = read_file(dir / linked_name);
  std::ifstream reader(dir / open_name, std::ios::binary);  // a reader that keeps the file open
  DOCTEST_REQUIRE(::link((dir / linked_name).c_str(), (elsewhere / "kept.safetensors").c_str()) == 0);

  // The second trace keeps the first one's files as spares; the third would write over them.
  trace_files(model, dir.path(), inputs[1], true);
  trace_files(model, dir.path(), inputs[2], true);
  const std::string through_reader{std::istreambuf_iterator<char>(reader), std::istreambuf_iterator<char>()};
  DOCTEST_CHECK(through_reader == open_before);
  DOCTEST_CHECK(read_file(elsewhere / "kept.safetensors") == linked_before);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(read_file(dir / open_name) == read_file(fresh / open_name));
  DOCTEST_CHECK(read_file(dir / linked_name) == read_file(fresh / linked_name));
  DOCTEST_CHECK(read_file(dir / open_name) != open_before);
}

DOCTEST_TEST_CASE("reuse_previous_files: a process that opens a spare while its write lease is held does not kill the trace") {
  // Before the fix the kernel signalled the lease holder with SIGIO, whose default action ends
  // the process: the child below died of it at the first spare. It runs in a child so that this
  // test reports that death instead of dying of it.
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, fresh;
  const auto child = start_child([&](int out) {
    tracetorch::detail::io_fault_injector = &open_the_leased_file;
    for (const auto& ids : inputs) trace_files(model, dir.path(), ids, true);  // the third writes over spares
    tracetorch::detail::io_fault_injector = nullptr;
    for (const pid_t opener : g_lease_breaks.openers) ::waitpid(opener, nullptr, 0);
    if (g_lease_breaks.hooked == 0) return write_text(out, "skipped");  // no lease granted here: nothing to test
    if (g_lease_breaks.broken == 0) throw std::runtime_error("no lease break was seen begun");
    require_fresh_trace(model, dir.path(), fresh.path(), inputs[2]);
  });
  const auto end = end_of(child, std::chrono::seconds(120));
  DOCTEST_CHECK_MESSAGE(end.code == 0, "the tracing child: " << end.described());
  if (end.code == 0 && end.output == "skipped") {
    DOCTEST_MESSAGE("skipped: this filesystem grants no write lease (" << dir.path() << "), so spares are never written over");
  }
}

DOCTEST_TEST_CASE("reuse_previous_files: a FIFO named like a trace file is replaced, and no later trace waits on it") {
  // The trace replaces the FIFO as it replaces a file of that name, and keeps it with the spares;
  // the next trace opened it to write over it, and a plain open of a FIFO waits for a reader:
  // before the fix that trace hung (the child below was killed after its 60 s).
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, fresh;
  const auto fifo = dir / "LlamaModel.embed_tokens_outputs.safetensors";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const auto child = start_child([&](int) {
    for (const auto& ids : inputs) trace_files(model, dir.path(), ids, true);
    require_fresh_trace(model, dir.path(), fresh.path(), inputs[2]);
  });
  const auto end = end_of(child, std::chrono::seconds(60));
  DOCTEST_REQUIRE_MESSAGE(end.code == 0, "the tracing child: " << end.described());
  struct stat info {};
  DOCTEST_REQUIRE(::lstat(fifo.c_str(), &info) == 0);
  DOCTEST_CHECK(S_ISREG(info.st_mode));  // the trace's file, where the FIFO was
}

DOCTEST_TEST_CASE("reuse_previous_files: a forked child's trace leaves the parent's spares, and the parent's next trace the user's files") {
  // Before the fix the child took the parent's spares for its own (it inherits the registry),
  // wrote over them and published that directory as debug_path; the parent's next trace then
  // dropped what it took for its spares, and removing it emptied debug_path: the user's notes
  // and the child's trace were deleted, and the trace failed ("cannot create the staging
  // directory"). All of it runs in a child process, so that the test runner's spares stay apart.
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, fresh;
  std::ofstream(dir / "notes.txt") << "the user's notes\n";
  const auto parent = start_child([&](int) {
    trace_files(model, dir.path(), inputs[0], true);
    trace_files(model, dir.path(), inputs[1], true);
    const auto spares = spare_directories(dir.path());
    if (spares.size() != 1) throw std::runtime_error("no spares after two traces");
    const ino_t spares_inode = inode_of(dir / spares[0]);
    const auto child = start_child([&](int) { trace_files(model, dir.path(), inputs[1], true); });
    if (const auto end = end_of(child, std::chrono::seconds(60)); end.code != 0) {
      throw std::runtime_error("the forked child's trace: " + end.described());
    }
    if (!std::filesystem::is_directory(dir / spares[0]) || inode_of(dir / spares[0]) != spares_inode) {
      throw std::runtime_error("the child used the parent's spares");
    }
    trace_files(model, dir.path(), inputs[2], true);
    if (read_file(dir / "notes.txt") != "the user's notes\n") throw std::runtime_error("the user's file is gone");
    require_fresh_trace(model, dir.path(), fresh.path(), inputs[2], "notes.txt");
  });
  const auto end = end_of(parent, std::chrono::seconds(120));
  DOCTEST_CHECK_MESSAGE(end.code == 0, "the tracing process: " << end.described());
  DOCTEST_CHECK(read_file(dir / "notes.txt") == "the user's notes\n");
}

DOCTEST_TEST_CASE("reuse_previous_files: a debug_path removed between traces is written anew") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, fresh;
  trace_files(model, dir.path(), inputs[0], true);
  trace_files(model, dir.path(), inputs[1], true);  // spares now
  std::filesystem::remove_all(dir.path());
  std::filesystem::create_directories(dir.path());
  trace_files(model, dir.path(), inputs[2], true);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(tracetorch_test::snapshot(dir.path()) == tracetorch_test::snapshot(fresh.path()));
}

DOCTEST_TEST_CASE("reuse_previous_files=false: the replaced files are deleted at once") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir;
  for (const auto& ids : inputs) trace_files(model, dir.path(), ids, false);
  DOCTEST_CHECK(spare_directories(dir.path()).empty());
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 144);
}

}  // DOCTEST_TEST_SUITE
