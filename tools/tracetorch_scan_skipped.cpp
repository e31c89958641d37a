// tracetorch-scan-skipped: which models skip which common model tests, and why. transformers'
// utils/scan_skipped_tests.py for tracetorch/testing.hpp: it reads the model test files
// (test_modeling_*.cpp) as text, without building them, finds each
// TRACETORCH_COMMON_MODEL_TESTS(Tester) and the tester's model_name and skipped_tests, and writes
// a JSON summary in transformers' schema.
//
//   tracetorch-scan-skipped [--tests-dir DIR] [--output_dir DIR] [--test_method_name NAME]
//
// Exit status: 0 written, 2 a bad command line or a file it cannot read or understand.
//
// The parts: scan/source_lexer.hpp reads C++ source as tokens, scan/tester_parser.hpp finds the
// testers in them, scan/test_files.hpp reads the files, scan/report.hpp writes the summaries.

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <tracetorch/testing/common_test_names.hpp>  // is_common_test

#include "command_line.hpp"
#include "scan/common.hpp"
#include "scan/report.hpp"
#include "scan/source_lexer.hpp"
#include "scan/test_files.hpp"
#include "scan/tester_parser.hpp"

namespace {

using namespace tracetorch::scan_skipped;
namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: tracetorch-scan-skipped [--tests-dir DIR] [--output_dir DIR] [--test_method_name NAME]\n"
    "\n"
    "Scans the model test files DIR/**/test_modeling_*.cpp (default tests/models) for\n"
    "TRACETORCH_COMMON_MODEL_TESTS(Tester) and the tester's skipped_tests, and writes which models\n"
    "run and skip each common test to OUTPUT_DIR/all_tests_scan_result.json (default: the current\n"
    "directory), or, for one test, OUTPUT_DIR/scan_<NAME>.json.\n"
    "--print-work-steps prints the scan's work count (characters and tokens visited) on stderr.\n"
    "Exit status: 0 written, 2 a bad command line or a file that cannot be read or understood.\n";

struct Options {
  fs::path tests_dir = "tests/models";
  fs::path output_dir = ".";
  std::string test_method_name;
  bool print_work_steps = false;  // for the tests: the scan's work count, on stderr
};

Options parse_command_line(int argc, char** argv) {
  using tracetorch::command_line::UsageError;
  Options options;
  for (tracetorch::command_line::ArgumentReader arg(argc, argv); arg.next();) {
    const std::string& name = arg.name();
    if (name == "--tests-dir" || name == "--tests_dir") {
      options.tests_dir = arg.value();
    } else if (name == "--output_dir" || name == "--output-dir") {
      options.output_dir = arg.value();
    } else if (name == "--print-work-steps") {
      options.print_work_steps = true;
    } else if (name == "--test_method_name" || name == "--test-method-name") {
      options.test_method_name = arg.value();
      if (!tracetorch::testing::is_common_test(options.test_method_name)) {
        throw UsageError("--test_method_name: \"" + options.test_method_name +
                         "\" is not a common test (see tracetorch::testing::common_test_names)");
      }
    } else {
      throw UsageError((arg.is_option() ? "unknown option " : "unexpected argument ") + name);
    }
  }
  return options;
}

/// Every tester of every model test file, printing one progress line per file; a model_name
/// used twice is an error.
std::vector<ModelTests> read_models(const std::vector<fs::path>& files) {
  std::printf("Parsing %zu model test files...\n", files.size());
  std::vector<ModelTests> models;
  std::map<std::string, fs::path> model_files;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string where = files[i].string();
    auto found = TesterParser(Lexer(read_test_file(files[i]), where).tokens(), where).parse();
    std::string line = "  (" + std::to_string(i + 1) + "/" + std::to_string(files.size()) + ") " +
                       files[i].filename().string() + ":";
    if (found.empty()) line += " no TRACETORCH_COMMON_MODEL_TESTS";
    for (auto& model : found) {
      if (const auto [at, added] = model_files.emplace(model.model, files[i]); !added) {
        throw ScanError(where + ": model_name \"" + model.model + "\" is already used in " + at->second.string());
      }
      line += " " + model.model + " (skips " + std::to_string(model.skipped.size()) + ")";
      model.file = files[i];
      models.push_back(std::move(model));
    }
    std::printf("%s\n", line.c_str());
  }
  return models;
}

void create_output_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw ScanError(dir.string() + ": cannot create the output directory" + (ec ? ": " + ec.message() : ""));
  }
}

int scan(const Options& options) {
  const auto models = read_models(model_test_files(options.tests_dir));
  create_output_dir(options.output_dir);
  if (!options.test_method_name.empty()) {
    report_one_test(options.test_method_name, models, options.output_dir);
  } else {
    report_all_tests(models, options.output_dir);
  }
  return 0;
}

/// Scans as `options` ask: the exit status (2: a file it cannot read or understand, printed).
int run(const Options& options) {
  try {
    const int status = scan(options);
    if (options.print_work_steps) std::fprintf(stderr, "work steps: %llu\n", static_cast<unsigned long long>(work_steps));
    return status;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "tracetorch-scan-skipped: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tracetorch::command_line::run_program("tracetorch-scan-skipped", kUsage, argc, argv, parse_command_line, run);
}
