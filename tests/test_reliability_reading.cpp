// Reliability of the readers (issue 8): only what can be read is read (detail/fs/read_file.hpp,
// shared by every reader): a FIFO, a device or a directory refused without waiting, read limits,
// symbolic links out of a trace directory, a deeply nested trace read in bounded memory.
// docs/reliability.md lists each case.

#include <doctest/doctest.h>
#include <tracetorch/detail/fs/read_file.hpp>
#include <tracetorch/detail/trace_format/reader.hpp>
#include <tracetorch/tracetorch.hpp>

#include "llama/llama.hpp"
#include "reliability_helpers.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <thread>

namespace reliability_test {

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// Reading files: only what can be read (detail/fs/read_file.hpp, shared by every reader)

/// The message of the tracetorch::Error `read` throws ("" if none). If `read` blocks on the FIFO
/// `fifo` (the bug this guards against), a helper thread opens the FIFO's writing end after 10 s
/// and closes it, which ends the wait: the test then fails on the message, never hangs.
std::string refusal_without_waiting(const std::filesystem::path& fifo, const std::function<void()>& read) {
  std::atomic<bool> done{false};
  std::thread rescuer([&] {
    for (int i = 0; i < 400 && !done; ++i) {  // at most 20 s
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (i < 200) continue;
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // fails until a reader waits
      if (fd >= 0) ::close(fd);
    }
  });
  std::string message;
  try {
    read();
  } catch (const tracetorch::Error& e) {
    message = e.what();
  }
  done = true;
  rescuer.join();
  return message;
}

DOCTEST_TEST_CASE("readers refuse a FIFO, a device or a directory with one clear line, without waiting") {
  TempDir dir;
  const auto fifo = dir / "pipe.json";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_cause = fifo.string() + ": is a FIFO (named pipe), not a regular file: refused";
  const auto refused = [&](const std::function<void()>& read) { return refusal_without_waiting(fifo, read); };
  DOCTEST_CHECK(refused([&] { tracetorch::detail::parse_trace_file(fifo); }) == "tracetorch: " + fifo_cause + ", reading it could wait forever");
  DOCTEST_CHECK(refused([&] { llama::LlamaConfig::from_json_file(fifo); }).find(fifo_cause) != std::string::npos);
  DOCTEST_CHECK(refused([&] { tracetorch::safetensors::Reader reader(fifo); }).find(fifo_cause) != std::string::npos);
  DOCTEST_CHECK(refused([&] { tracetorch::detail::read_regular_file(fifo, 100, "a test"); }).find(fifo_cause) != std::string::npos);

  // The trace JSON of a trace directory as a FIFO: found by name, then refused.
  TempDir trace;
  const auto json = trace / "X_debug_tree_FULL_TENSORS.json";
  DOCTEST_REQUIRE(::mkfifo(json.c_str(), 0600) == 0);
  const auto in_dir = refusal_without_waiting(json, [&] {
    tracetorch::detail::parse_trace_file(tracetorch::detail::resolve_trace_path(trace.path()));
  });
  DOCTEST_CHECK(in_dir.find(json.string() + ": is a FIFO (named pipe)") != std::string::npos);

  // A device: /dev/zero would give bytes without end.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::parse_trace_file("/dev/zero"),
                               "tracetorch: /dev/zero: is a character device, not a regular file: refused",
                               tracetorch::detail::FileRefused);
  // A directory where a file is needed.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::parse_trace_file(dir.path()),
                               ("tracetorch: " + dir.path().string() + ": is a directory, not a file").c_str(), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(llama::LlamaConfig::from_json_file(dir.path()),
                               ("tracetorch: " + dir.path().string() + ": is a directory, not a file").c_str(), tracetorch::Error);
}

DOCTEST_TEST_CASE("read limits: a file over the limit is refused before it is read, its size named") {
  TempDir dir;
  std::ofstream(dir / "big.json") << std::string(1000, ' ');
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::read_regular_file(dir / "big.json", 999, "a test file"),
                               ("tracetorch: " + (dir / "big.json").string() +
                                ": is 1000 bytes, more than the limit of 999 bytes for a test file").c_str(),
                               tracetorch::Error);
  DOCTEST_CHECK(tracetorch::detail::read_regular_file(dir / "big.json", 1000, "a test file").size() == 1000);
  DOCTEST_CHECK(tracetorch::detail::kMaxTraceJsonBytes == std::uint64_t(1) << 30);  // as docs/reliability.md says
  DOCTEST_CHECK(tracetorch::detail::kMaxConfigBytes == std::uint64_t(16) << 20);
  DOCTEST_CHECK(tracetorch::detail::kMaxSourceBytes == std::uint64_t(64) << 20);
}

DOCTEST_TEST_CASE("a symbolic link in a trace directory is never followed out of it, and nothing of its target is echoed") {
  TempDir outside, trace;
  const std::string secret = "SECRET-7f3a-do-not-print";
  std::ofstream(outside / "secret.safetensors") << secret;
  std::ofstream(outside / "secret.json") << "{\"module_path\": \"" << secret << "\"}";
  std::filesystem::copy(data_dir() / "tiny_llama_upstream" / "trace_st", trace.path());
  const auto json = trace / "LlamaModel_debug_tree_FULL_TENSORS.json";
  const auto read = [&] { tracetorch::detail::parse_trace_file(tracetorch::detail::resolve_trace_path(trace.path())); };

  // A tensor file replaced by a link out of the directory: refused before anything is read.
  const auto victim = trace / "LlamaModel.norm_outputs.safetensors";
  DOCTEST_REQUIRE(std::filesystem::exists(victim));
  std::filesystem::rename(victim, trace / "norm.kept");
  std::filesystem::create_symlink(outside / "secret.safetensors", victim);
  const auto refusal = [&] {
    try {
      read();
    } catch (const tracetorch::Error& e) {
      return std::string(e.what());
    }
    return std::string("(read without error)");
  };
  std::string message = refusal();
  DOCTEST_CHECK(message == "tracetorch: " + victim.string() + ": is a symbolic link out of the trace directory: not followed");
  DOCTEST_CHECK(message.find(secret) == std::string::npos);

  // A link that stays inside the directory is followed.
  std::filesystem::remove(victim);
  std::filesystem::create_symlink("norm.kept", victim);
  DOCTEST_CHECK_NOTHROW(read());
  // ... and so is a dangling one's refusal worded without its target.
  std::filesystem::remove(victim);
  std::filesystem::create_symlink(outside / "gone", victim);
  DOCTEST_CHECK_THROWS_WITH_AS(read(), ("tracetorch: " + victim.string() + ": is a symbolic link that cannot be resolved: not followed").c_str(),
                               tracetorch::Error);

  // The trace JSON itself a link out of the directory.
  std::filesystem::remove(json);
  std::filesystem::create_symlink(outside / "secret.json", json);
  message = refusal();
  DOCTEST_CHECK(message == "tracetorch: " + json.string() + ": is a symbolic link out of the trace directory: not followed");
  DOCTEST_CHECK(message.find(secret) == std::string::npos);
}

/// A trace whose inputs nest `levels` objects, each under a key of `key_size` bytes, over a
/// list of `leaves` zeros: every leaf's location repeats all the keys above it.
std::string deeply_nested_trace(std::size_t levels, std::size_t key_size, std::size_t leaves) {
  std::string text = R"({"module_path": "Deep", "inputs": )";
  const std::string key = "{\"" + std::string(key_size, 'k') + "\": ";
  for (std::size_t i = 0; i < levels; ++i) text += key;
  text += "[";
  for (std::size_t i = 0; i < leaves; ++i) text += i == 0 ? "0" : ",0";
  text += "]" + std::string(levels, '}') + "}";
  return text;
}

DOCTEST_TEST_CASE("a deeply nested trace is read in memory proportional to its size (the locations' bytes are bounded)") {
  using tracetorch::detail::TraceParser;
  // 200 keys of 4000 bytes over 100,000 values: 1.0 MB, whose locations would take 80 GB.
  const std::string hostile = deeply_nested_trace(200, 4000, 100'000);
  DOCTEST_REQUIRE(hostile.size() < 1'100'000);
  const std::size_t budget = tracetorch::detail::kTraceLocationSlack + tracetorch::detail::kTraceLocationBytesPerInputByte * hostile.size();
  std::string message;
  try {
    TraceParser("deep.json").parse(hostile);
  } catch (const tracetorch::Error& e) {
    message = e.what();
  }
  DOCTEST_CHECK(message == "tracetorch: deep.json: module Deep: the values' locations take more than " + std::to_string(budget) +
                               " bytes, more than this file's size allows (keys nested deep above many values)");

  // The same nesting over one value is read, its location whole; the locations of every trace
  // read stay within the budget, which is what bounds the reader's memory (the bound is
  // checked before each location is copied).
  const std::string one = deeply_nested_trace(200, 4000, 1);
  TraceParser parser("one.json");
  const auto trace = parser.parse(one);
  DOCTEST_REQUIRE(trace.calls.size() == 1);
  DOCTEST_REQUIRE(trace.calls[0].inputs.size() == 1);
  DOCTEST_CHECK(trace.calls[0].inputs[0].location.size() == 6 + 200 * 4001 + 2);  // "inputs" + ".k..." x 200 + ".0"
  DOCTEST_CHECK(parser.location_bytes() == trace.calls[0].inputs[0].location.size());

  // A real trace's locations take less than one byte per byte of JSON.
  for (const char* kind : {"trace_repr", "trace_st"}) {
    const auto path = data_dir() / "tiny_llama_upstream" / kind / "LlamaModel_debug_tree_FULL_TENSORS.json";
    const std::string text = read_file(path);
    TraceParser real(path.string());
    real.parse(text);
    DOCTEST_CHECK(real.location_bytes() > 0);
    DOCTEST_CHECK(real.location_bytes() < text.size());
  }
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
