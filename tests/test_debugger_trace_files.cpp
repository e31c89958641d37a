// tracetorch/debugger.hpp's reuse_previous_files (detail/debugger/trace_files.hpp, spare_files.hpp):
// a later trace into the same debug_path writes over the files the one before it replaced, never
// over one still open or linked elsewhere, and reads as a fresh trace.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

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
