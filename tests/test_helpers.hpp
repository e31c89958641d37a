#pragma once
// Shared by the test files: fixture paths, temporary directories, file reading, and the comparison
// of a C++ trace with an upstream Python one (the Llama and GPT-2 ports).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <utility>
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
/// not part of a trace and left out; test_debugger_trace_files.cpp tests them.
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

#ifdef TRACETORCH_DIFF
inline RunResult run_diff(const std::string& arguments) { return run_program(TRACETORCH_DIFF, arguments); }
#endif

inline bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

/// A program's refusal: exit 1 and one line of output holding `message` ("llama_trace: error: ...").
inline void expect_refused(const RunResult& result, const std::string& message) {
  DOCTEST_CHECK_MESSAGE(result.exit_code == 1, result.output);
  DOCTEST_CHECK_MESSAGE(contains(result.output, message), result.output);
  DOCTEST_CHECK_MESSAGE(std::count(result.output.begin(), result.output.end(), '\n') == 1, result.output);
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// The names of a directory's entries.
inline std::set<std::string> file_names(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

/// "0aff" -> the bytes 0x0a 0xff (lower-case hex, as the Python fixtures write it).
inline std::string from_hex(std::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return out;
}

/// A dtype by the name Python's fixtures give it ("float32", "complex64", ...).
inline c10::ScalarType dtype_named(std::string_view name) {
  static const std::pair<std::string_view, c10::ScalarType> table[] = {
      {"float32", torch::kFloat},        {"float64", torch::kDouble},        {"float16", torch::kHalf},
      {"bfloat16", torch::kBFloat16},    {"complex32", torch::kComplexHalf}, {"complex64", torch::kComplexFloat},
      {"complex128", torch::kComplexDouble}, {"int64", torch::kLong},        {"int32", torch::kInt},
      {"int16", torch::kShort},          {"int8", torch::kChar},             {"uint8", torch::kByte},
      {"bool", torch::kBool},            {"quint8", torch::kQUInt8},         {"qint8", torch::kQInt8},
  };
  for (const auto& [n, type] : table)
    if (n == name) return type;
  throw std::runtime_error("unknown dtype " + std::string(name));
}

inline std::vector<std::int64_t> int_list(const boost::json::value& v) {
  std::vector<std::int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.to_number<std::int64_t>());
  return out;
}

inline bool is_statistic(std::string_view key) { return key == "mean" || key == "std" || key == "min" || key == "max"; }

/// `tensor(-1.2345e-03)` -> -1.2345e-03
inline double printed_number(std::string_view text) {
  const auto open = text.find('(');
  return std::stod(std::string(text.substr(open + 1, text.find_first_of(",)", open) - open - 1)));
}

/// The C++ trace against Python's: the same keys in the same order, the same module paths, shapes,
/// dtypes and non-tensor values, byte-identical printed tensor lines; statistics within float
/// summation order (the last printed digit).
inline void expect_upstream_trace(const boost::json::value& ours, const boost::json::value& ref, const std::string& where) {
  DOCTEST_INFO("at " << where);
  DOCTEST_REQUIRE(ours.kind() == ref.kind());
  if (ref.is_object()) {
    std::vector<std::string> ours_keys, ref_keys;
    for (const auto& e : ours.as_object()) ours_keys.emplace_back(e.key());
    for (const auto& e : ref.as_object()) ref_keys.emplace_back(e.key());
    DOCTEST_REQUIRE(ours_keys == ref_keys);
    std::string path = where;
    if (const auto* module_path = ref.as_object().if_contains("module_path")) path = std::string(module_path->as_string());
    for (const auto& e : ref.as_object()) {
      const auto& mine = ours.as_object().at(e.key());
      if (is_statistic(e.key())) {
        const double a = printed_number(mine.as_string()), b = printed_number(e.value().as_string());
        // The same text first: "tensor(inf)" on both sides (a mask's std) is equal, though inf - inf is NaN.
        DOCTEST_CHECK_MESSAGE((mine == e.value() || std::abs(a - b) <= 1e-6 + 1e-3 * std::abs(b)),
                              path << "." << e.key() << ": " << mine << " vs " << e.value());
      } else {
        expect_upstream_trace(mine, e.value(), path + "." + std::string(e.key()));
      }
    }
  } else if (ref.is_array()) {
    DOCTEST_REQUIRE(ours.as_array().size() == ref.as_array().size());
    for (std::size_t i = 0; i < ref.as_array().size(); ++i) {
      expect_upstream_trace(ours.as_array()[i], ref.as_array()[i], where + "[" + std::to_string(i) + "]");
    }
  } else {
    DOCTEST_CHECK(ours == ref);
  }
}


/// Both kinds of a C++ trace (`ours`/repr, `ours`/st) hold the files of the Python reference's
/// (`reference`/trace_repr, `reference`/trace_st), each byte for byte.
inline void expect_trace_files_identical(const std::filesystem::path& ours, const std::filesystem::path& reference) {
  for (const std::string kind : {"repr", "st"}) {
    const auto expected = reference / ("trace_" + kind);
    DOCTEST_CHECK(file_names(ours / kind) == file_names(expected));
    for (const auto& name : file_names(expected)) {
      DOCTEST_INFO(kind, " ", name);
      DOCTEST_CHECK(read_file(ours / kind / name) == read_file(expected / name));
    }
  }
}

/// A C++ trace of both kinds (`ours`/repr, `ours`/st) against the Python reference's
/// (`reference`/trace_repr, `reference`/trace_st) of the model `model_name`: the JSON files as
/// expect_upstream_trace checks them, the same file names, every tensor file within 1e-5 with the
/// same dtype and shape, and tracetorch-diff (when built) finding nothing; the diff runs first and
/// its report comes with any failure. Returns the number of tensor files compared.
inline std::size_t expect_trace_matches_reference(const std::filesystem::path& ours, const std::filesystem::path& reference,
                                                  const std::string& model_name) {
  // tracetorch-diff first: when a check below fails, its report (the first divergence, named)
  // is printed with the failure, which is what a porter reads to find the cause.
  std::string diff_reports;
#ifdef TRACETORCH_DIFF
  for (const std::string kind : {"repr", "st"}) {
    const auto diff = run_program(TRACETORCH_DIFF, (reference / ("trace_" + kind)).string() + " " + (ours / kind).string());
    DOCTEST_CHECK_MESSAGE(diff.exit_code == 0, "tracetorch-diff on the " << kind << " traces:\n" << diff.output);
    diff_reports += "tracetorch-diff, " + kind + " traces (exit " + std::to_string(diff.exit_code) + "):\n" + diff.output;
  }
#endif
  DOCTEST_INFO(diff_reports);
  for (const std::string kind : {"repr", "st"}) {
    for (const std::string file : {"SUMMARY", "FULL_TENSORS"}) {
      const std::string name = model_name + "_debug_tree_" + file + ".json";
      expect_upstream_trace(read_json(ours / kind / name), read_json(reference / ("trace_" + kind) / name), kind + " " + file);
    }
  }
  std::size_t compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(reference / "trace_st")) {
    if (entry.path().extension() != ".safetensors") continue;
    DOCTEST_INFO(entry.path().filename().string());
    const auto ref = tracetorch::safetensors::load_single(entry.path());
    const auto mine = tracetorch::safetensors::load_single(ours / "st" / entry.path().filename());
    DOCTEST_REQUIRE((mine.scalar_type() == ref.scalar_type()));
    DOCTEST_REQUIRE(mine.sizes() == ref.sizes());
    DOCTEST_CHECK(torch::allclose(mine.to(torch::kDouble), ref.to(torch::kDouble), 0, 1e-5));
    ++compared;
  }
  return compared;
}

}  // namespace tracetorch_test
