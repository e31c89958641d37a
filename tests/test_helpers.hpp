#pragma once
// Shared by the test files: fixture paths, temporary directories, file reading.

#include <tracetorch/tracetorch.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace tracetorch_test {

inline std::filesystem::path data_dir() { return TRACETORCH_TEST_DATA; }
/// The tiny Llama traced with upstream transformers' call conventions (../shared/fixtures/tiny_llama_upstream).
inline std::filesystem::path tiny_llama_dir() { return data_dir() / "tiny_llama_upstream"; }
/// The same model traced by the older positional reference (llama_ref.py): a trace of another convention.
inline std::filesystem::path tiny_llama_positional_dir() { return data_dir() / "tiny_llama"; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Every module_path of a trace tree, in depth-first (call) order.
inline std::vector<std::string> module_paths(const boost::json::value& node) {
  std::vector<std::string> out{std::string(node.at("module_path").as_string())};
  if (const auto* children = node.as_object().if_contains("children")) {
    for (const auto& child : children->as_array()) {
      const auto sub = module_paths(child);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  }
  return out;
}

inline boost::json::value read_json(const std::filesystem::path& path) { return boost::json::parse(read_file(path)); }

/// A fresh directory under the system temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() / ("tracetorch-test-" + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Every entry of a directory: name -> contents ("<dir>" for a directory). The debugger's spares
/// (reuse_previous_files: the files earlier traces replaced, kept while the process runs) are
/// not part of a trace and left out; test_debugger.cpp tests them.
inline std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(".tracetorch-spares-")) continue;
    out[name] = entry.is_directory() ? std::string("<dir>") : read_file(entry.path());
  }
  return out;
}

inline std::size_t count_files(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) n += entry.is_regular_file() ? 1 : 0;
  return n;
}

/// What a program printed (stdout and stderr) and its exit code (-1 if it did not exit).
struct RunResult {
  int exit_code;
  std::string output;
};

/// Runs `program arguments` through the shell and collects its output.
inline RunResult run_program(const std::string& program, const std::string& arguments) {
  const std::string command = program + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + program);
  std::string output;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace tracetorch_test
