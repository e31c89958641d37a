// Every refusal names the file that caused it (issue 37, item 5): a config's check that no one key
// holds (ConfigFile::fail, ConfigFile::checked), and a tensor too large for the memory the
// process may use (safetensors::Reader: the allocator's refusal carries the file and tensor).
// docs/reliability.md ("Reading files") cites these tests.

#include "test_helpers.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tracetorch_refusals_test {
namespace {

namespace fs = std::filesystem;

/// A port's config and the checks a port writes (the shape of the Llama example's).
struct TinyPortConfig {
  std::int64_t vocab_size = 100, hidden_size = 64, num_attention_heads = 4;
};

/// Checks written without the file, as a port's validate() or a memory estimate is.
void check_fits(const TinyPortConfig& config) {
  if (config.vocab_size > (std::int64_t{1} << 40) / config.hidden_size) {
    throw tracetorch::Error("the embedding (vocab_size x hidden_size) needs more than 4 TiB: refused");
  }
}

TinyPortConfig read_tiny_port_config(const tracetorch::ConfigFile& file) {
  TinyPortConfig config;
  file.read("vocab_size", config.vocab_size);
  file.read("hidden_size", config.hidden_size);
  file.read("num_attention_heads", config.num_attention_heads);
  if (config.num_attention_heads <= 0) file.fail("num_attention_heads", "is " + std::to_string(config.num_attention_heads) + ": sizes must be positive");
  if (config.hidden_size % config.num_attention_heads != 0) {
    file.fail("hidden_size", "is " + std::to_string(config.hidden_size) + ", not a multiple of \"num_attention_heads\" (" +
                                 std::to_string(config.num_attention_heads) + ")");
  }
  file.checked([&] { check_fits(config); });
  return config;
}

std::string refusal_of(const fs::path& path) {
  try {
    read_tiny_port_config(tracetorch::ConfigFile(path));
  } catch (const tracetorch::Error& error) {
    return error.what();
  }
  return "(accepted)";
}

DOCTEST_TEST_SUITE("reliability") {

DOCTEST_TEST_CASE("an absurd config is refused naming the config file, and the key where one key holds the fault") {
  tracetorch_test::TempDir dir;
  const auto config = dir / "absurd.json";
  tracetorch_test::write_text(config, R"({"vocab_size": 100, "hidden_size": 64, "num_attention_heads": 5})");
  DOCTEST_CHECK(refusal_of(config) == "tracetorch: " + config.string() +
                                          ": \"hidden_size\" is 64, not a multiple of \"num_attention_heads\" (5)");
  tracetorch_test::write_text(config, R"({"vocab_size": 1000000000000, "hidden_size": 64, "num_attention_heads": 4})");
  DOCTEST_CHECK(refusal_of(config) == "tracetorch: " + config.string() +
                                          ": the embedding (vocab_size x hidden_size) needs more than 4 TiB: refused");
  tracetorch_test::write_text(config, R"({"vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4})");
  DOCTEST_CHECK(refusal_of(config) == "(accepted)");

  const tracetorch::ConfigFile file(std::string_view("{}"), "config.json");
  DOCTEST_CHECK_THROWS_WITH_AS(file.fail("the sizes overflow when multiplied: refused"),
                               "tracetorch: config.json: the sizes overflow when multiplied: refused", tracetorch::Error);
  // A message that names the file already is left as it is; other exceptions pass unchanged.
  DOCTEST_CHECK_THROWS_WITH_AS(file.checked([] { throw tracetorch::Error("llama: config.json: rope_theta must be > 0"); }),
                               "llama: config.json: rope_theta must be > 0", tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(file.checked([] { throw tracetorch::Error("tracetorch: sizes must be positive"); }),
                               "tracetorch: config.json: sizes must be positive", tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(file.checked([] { throw std::logic_error("not ours"); }), "not ours", std::logic_error);
  int runs = 0;
  file.checked([&] { ++runs; });
  DOCTEST_CHECK(runs == 1);
}

/// The address space this process has mapped now, in bytes (VmSize in /proc/self/status).
std::uint64_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmSize:")) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

DOCTEST_TEST_CASE("a tensor larger than the memory the process may use: the reader's refusal names the file and the tensor") {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer maps terabytes of shadow memory: no address-space limit leaves it room.
  DOCTEST_MESSAGE("skipped under AddressSanitizer: an address-space limit leaves its shadow memory no room");
  return;
#endif
  tracetorch_test::TempDir dir;
  const auto path = dir / "huge.safetensors";
  const std::uint64_t bytes = std::uint64_t{3} << 30;  // 3 GiB of float32 zeros, a hole on disk
  std::string header = "{\"weight\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(bytes / 4) + "],\"data_offsets\":[0," +
                       std::to_string(bytes) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(std::uint64_t(header.size()) >> (8 * i)));
    out << header;
  }
  fs::resize_file(path, 8 + header.size() + bytes);

  // In a child whose address space may grow by 512 MiB only: loading the tensor whole fails.
  int fds[2];
  DOCTEST_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  DOCTEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string message = "(loaded)";
    const rlimit limit{mapped_bytes() + (std::uint64_t{512} << 20), RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) message = "(setrlimit failed)";
    try {
      const tracetorch::safetensors::Reader reader(path);
      reader.load("weight");
    } catch (const std::exception& error) {
      message = error.what();
    }
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  DOCTEST_CHECK(::waitpid(pid, &status, 0) == pid);
  DOCTEST_CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  DOCTEST_INFO(message);
  DOCTEST_CHECK(message.starts_with("tracetorch: " + path.string() + ": cannot hold tensor \"weight\" (3221225472 bytes) in memory: "));
  DOCTEST_CHECK(message.find("DefaultCPUAllocator") != std::string::npos);  // the allocator's own words follow
}

}  // DOCTEST_TEST_SUITE("reliability")

}  // namespace
}  // namespace tracetorch_refusals_test
