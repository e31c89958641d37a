// tracetorch-scan-skipped: its scan of tests/models agrees with what this executable's
// compiled skip lists make doctest skip; and its parsing, JSON and errors on the fixtures in
// tests/data/scan/.

#include <doctest/doctest.h>
#include <tracetorch/testing/common_tests.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sys/stat.h>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "../test_helpers.hpp"

#ifdef TRACETORCH_SCAN_SKIPPED

namespace {

using tracetorch_test::read_file;
using tracetorch_test::read_json;
using tracetorch_test::run_program;
using tracetorch_test::TempDir;

const std::string kScanner = TRACETORCH_SCAN_SKIPPED;
const std::filesystem::path kFixtures = tracetorch_test::data_dir() / "scan";

/// For the shell (the paths here hold no quote).
std::string quoted(const std::filesystem::path& path) {
  std::string text(1, '\'');
  text += path.string();
  text += '\'';
  return text;
}

std::string xml_unescape(std::string text) {
  static const std::pair<const char*, const char*> entities[] = {
      {"&quot;", "\""}, {"&apos;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (const auto& [entity, plain] : entities) {
    for (auto at = text.find(entity); at != std::string::npos; at = text.find(entity, at + 1)) {
      text.replace(at, std::string(entity).size(), plain);
    }
  }
  return text;
}

/// What doctest itself says about the common tests compiled into this executable: per model,
/// the tests it runs and the tests it skips with their descriptions.
struct CompiledModel {
  std::set<std::string> ran;
  std::map<std::string, std::string> skipped;  // test -> reason
};

std::map<std::string, CompiledModel> compiled_skips() {
  // --no-skip lists every case with its skip flag; excluding every case makes doctest report
  // each one as skipped, with its description.
  const auto listed = run_program(TRACETORCH_MODEL_TESTS, "--list-test-cases --no-skip --reporters=xml");
  const auto described = run_program(TRACETORCH_MODEL_TESTS, "--reporters=xml '--test-case-exclude=*'");
  DOCTEST_REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
  DOCTEST_REQUIRE_MESSAGE(described.exit_code == 0, described.output);

  // One <TestCase .../> element per line; attributes read one by one (the description is optional).
  const auto attribute = [](const std::string& element, const std::string& key) -> std::optional<std::string> {
    std::smatch match;
    if (!std::regex_search(element, match, std::regex(" " + key + "=\"([^\"]*)\""))) return std::nullopt;
    return xml_unescape(match[1]);
  };
  const auto elements = [](const std::string& xml) {
    std::vector<std::string> lines;
    std::istringstream in(xml);
    for (std::string line; std::getline(in, line);) {
      if (line.find("<TestCase ") != std::string::npos) lines.push_back(line);
    }
    return lines;
  };
  std::map<std::string, std::string> descriptions;
  for (const auto& element : elements(described.output)) {
    if (const auto description = attribute(element, "description")) descriptions[*attribute(element, "name")] = *description;
  }
  std::map<std::string, CompiledModel> models;
  for (const auto& element : elements(listed.output)) {
    const std::string name = attribute(element, "name").value_or("");
    const auto colon = name.find(": ");
    if (colon == std::string::npos || !tracetorch::testing::is_common_test(name.substr(colon + 2))) continue;
    const std::string model = name.substr(0, colon), test = name.substr(colon + 2);
    if (attribute(element, "skipped") == "true") {
      models[model].skipped[test] = descriptions[name];
    } else {
      models[model].ran.insert(test);
    }
  }
  return models;
}

std::vector<std::string> strings_of(const boost::json::value& array) {
  std::vector<std::string> out;
  for (const auto& item : array.as_array()) out.emplace_back(item.as_string());
  return out;
}

}  // namespace

#ifdef TRACETORCH_TEST_PORTS
constexpr bool kEveryModelTestCompiled = true;
#else
constexpr bool kEveryModelTestCompiled = false;  // TRACETORCH_BUILD_PORTS=OFF: Llava's and Qwen2-MoE's left out
#endif

// The scanner reads every file of tests/models, so this needs all of them compiled in.
DOCTEST_TEST_CASE("scan: the scan of tests/models agrees with what tracetorch_model_tests skips" *
                  doctest::skip(!kEveryModelTestCompiled)) {
  TempDir out;
  const auto scan = run_program(kScanner, "--tests-dir " + quoted(TRACETORCH_MODEL_TESTS_DIR) + " --output_dir " + quoted(out.path()));
  DOCTEST_REQUIRE_MESSAGE(scan.exit_code == 0, scan.output);
  const auto json = read_json(out.path() / "all_tests_scan_result.json").as_object();

  const auto compiled = compiled_skips();
  DOCTEST_REQUIRE(compiled.size() == 6);  // the Llama and Qwen2-MoE ports, the BERT decoder, the ViT encoder, CLIP, Llava
  std::size_t skips = 0;
  for (const auto& [model, tests] : compiled) {
    DOCTEST_CHECK_MESSAGE(tests.ran.size() + tests.skipped.size() == std::size(tracetorch::testing::common_test_names),
                          model << " does not register every common test");
    skips += tests.skipped.size();
  }
  DOCTEST_CHECK(skips >= 4);

  DOCTEST_REQUIRE(json.size() == std::size(tracetorch::testing::common_test_names));
  for (const auto test_name : tracetorch::testing::common_test_names) {
    const std::string test(test_name);
    DOCTEST_INFO("test: " << test);
    DOCTEST_REQUIRE(json.contains(test));
    const auto& entry = json.at(test).as_object();
    std::vector<std::string> ran, skipped, reasons;
    for (const auto& [model, tests] : compiled) {
      if (tests.ran.count(test)) ran.push_back(model);
      if (const auto found = tests.skipped.find(test); found != tests.skipped.end()) {
        skipped.push_back(model);
        reasons.push_back(model + ": " + found->second);
      }
    }
    std::sort(reasons.begin(), reasons.end());
    DOCTEST_CHECK(entry.at("origin").as_string() == "common");
    DOCTEST_CHECK(strings_of(entry.at("models_ran")) == ran);
    DOCTEST_CHECK(strings_of(entry.at("models_skipped")) == skipped);
    DOCTEST_CHECK(strings_of(entry.at("reasons_skipped")) == reasons);
    const double expected = std::round(10000.0 * static_cast<double>(skipped.size()) / static_cast<double>(compiled.size())) / 10000.0;
    DOCTEST_CHECK(entry.at("skipped_proportion").to_number<double>() == doctest::Approx(expected).epsilon(1e-12));
  }
}

DOCTEST_TEST_CASE("scan: fixtures: adjacent literals, comments, escapes, designated initializers, raw strings") {
  TempDir out;
  const auto scan = run_program(kScanner, "--tests-dir " + quoted(kFixtures / "models") + " --output_dir " + quoted(out.path()));
  DOCTEST_REQUIRE_MESSAGE(scan.exit_code == 0, scan.output);
  // Progress, then the totals over (test, model) pairs, the reasons and the file.
  DOCTEST_CHECK(scan.output.find("Parsing 3 model test files...") != std::string::npos);
  DOCTEST_CHECK(scan.output.find("(15/15) test_training") != std::string::npos);
  DOCTEST_CHECK(scan.output.find("Ran : 42/45\n") != std::string::npos);
  DOCTEST_CHECK(scan.output.find("Skipped : 3/45 (6.7%)\n") != std::string::npos);
  DOCTEST_CHECK(scan.output.find("- test_cross_attention_outputs: AlphaModel: encoder only (no \"encoder_hidden_states\")\n") !=
                std::string::npos);
  const auto result = out.path() / "all_tests_scan_result.json";
  DOCTEST_CHECK(scan.output.find("JSON saved to " + std::filesystem::absolute(result).string()) != std::string::npos);

  const auto json = read_json(result).as_object();
  DOCTEST_CHECK(json.size() == std::size(tracetorch::testing::common_test_names));
  const auto& embeds = json.at("test_inputs_embeds_matches_input_ids").as_object();
  DOCTEST_CHECK(strings_of(embeds.at("models_ran")) == std::vector<std::string>{"BetaModel"});
  DOCTEST_CHECK(strings_of(embeds.at("models_skipped")) == std::vector<std::string>{"AlphaModel", "GammaModel"});
  DOCTEST_CHECK(strings_of(embeds.at("reasons_skipped")) ==
                std::vector<std::string>{"AlphaModel: Alpha has no \"inputs_embeds\" path \xe2\x80\x94 by design",
                                         "GammaModel: pixel_values only, no input_ids"});
  const auto& cross = json.at("test_cross_attention_outputs").as_object();
  DOCTEST_CHECK(strings_of(cross.at("models_skipped")) == std::vector<std::string>{"AlphaModel"});
  // Commented-out skips and the string inside a member function are not skips.
  for (const char* test : {"test_save_load", "test_training", "test_determinism"}) {
    DOCTEST_CHECK(json.at(test).at("models_skipped").as_array().empty());
    DOCTEST_CHECK(json.at(test).at("models_ran").as_array().size() == 3);
  }
  // Rounded to 4 places and written as Python writes floats.
  const std::string text = read_file(result);
  DOCTEST_CHECK(text.find("\"skipped_proportion\": 0.6667,") != std::string::npos);
  DOCTEST_CHECK(text.find("\"skipped_proportion\": 0.3333,") != std::string::npos);
  DOCTEST_CHECK(text.find("\"skipped_proportion\": 0.0,") != std::string::npos);
  DOCTEST_CHECK(text.find("\"origin\": \"common\"") != std::string::npos);
}

DOCTEST_TEST_CASE("scan: one test: scan_<NAME>.json in transformers' schema, without origin") {
  TempDir out;
  const auto scan = run_program(kScanner, "--tests-dir " + quoted(kFixtures / "models") + " --output_dir " + quoted(out.path()) +
                                              " --test_method_name test_inputs_embeds_matches_input_ids");
  DOCTEST_REQUIRE_MESSAGE(scan.exit_code == 0, scan.output);
  DOCTEST_CHECK(scan.output.find("== test_inputs_embeds_matches_input_ids ==\nRan : 1/3\nSkipped : 2/3 (66.7%)\n"
                                 "- AlphaModel: Alpha has no \"inputs_embeds\" path \xe2\x80\x94 by design\n"
                                 "- GammaModel: pixel_values only, no input_ids\nJSON saved to ") != std::string::npos);
  DOCTEST_CHECK(!std::filesystem::exists(out.path() / "all_tests_scan_result.json"));
  // json.dump(indent=2) with ensure_ascii, byte for byte.
  DOCTEST_CHECK(read_file(out.path() / "scan_test_inputs_embeds_matches_input_ids.json") ==
                R"({
  "test_inputs_embeds_matches_input_ids": {
    "models_ran": [
      "BetaModel"
    ],
    "models_skipped": [
      "AlphaModel",
      "GammaModel"
    ],
    "skipped_proportion": 0.6667,
    "reasons_skipped": [
      "AlphaModel: Alpha has no \"inputs_embeds\" path \u2014 by design",
      "GammaModel: pixel_values only, no input_ids"
    ]
  }
})");
}

DOCTEST_TEST_CASE("scan: default directories: tests/models under the working directory, output there too") {
  TempDir work;
  std::filesystem::create_directories(work.path() / "tests");
  std::filesystem::copy(kFixtures / "models", work.path() / "tests" / "models", std::filesystem::copy_options::recursive);
  const auto scan = run_program("cd " + quoted(work.path()) + " && " + kScanner, "--test_method_name=test_cross_attention_outputs");
  DOCTEST_REQUIRE_MESSAGE(scan.exit_code == 0, scan.output);
  DOCTEST_CHECK(scan.output.find("Skipped : 1/3 (33.3%)") != std::string::npos);
  const auto json = read_json(work.path() / "scan_test_cross_attention_outputs.json");
  DOCTEST_CHECK(json.at("test_cross_attention_outputs").at("skipped_proportion").as_double() == 0.3333);
  DOCTEST_CHECK(!json.at("test_cross_attention_outputs").as_object().contains("origin"));
}

DOCTEST_TEST_CASE("scan: bad input and bad command lines exit 2 with a message on stderr") {
  TempDir out;
  const auto check_fails = [&](const std::string& arguments, const std::string& message) {
    DOCTEST_INFO("arguments: " << arguments);
    const auto result = run_program(kScanner, arguments + " --output_dir " + quoted(out.path()));
    DOCTEST_CHECK(result.exit_code == 2);
    DOCTEST_CHECK_MESSAGE(result.output.find(message) != std::string::npos, result.output);
  };
  check_fails("--tests-dir " + quoted(kFixtures / "bad_unknown_test"),
              "test_modeling_unknown.cpp:6: UnknownTester::skipped_tests: \"test_inputs_embeds\" is not a common test");
  check_fails("--tests-dir " + quoted(kFixtures / "bad_not_literal"),
              "test_modeling_not_literal.cpp:5: NotLiteralTester::skipped_tests entry (the reason): expected a string "
              "literal, found 'kReason'");
  check_fails("--tests-dir " + quoted(kFixtures / "no_such_dir"), "no_such_dir: no such directory");
  check_fails("--tests-dir " + quoted(kFixtures / "models") + " --test_method_name test_inputs_embeds",
              "\"test_inputs_embeds\" is not a common test");
  check_fails("--frobnicate", "unknown option --frobnicate");
  check_fails("tests/models", "unexpected argument tests/models");
  const auto no_value = run_program(kScanner, "--tests-dir");
  DOCTEST_CHECK(no_value.exit_code == 2);
  DOCTEST_CHECK(no_value.output.find("--tests-dir needs a value") != std::string::npos);

  // A test file that cannot be read (a dangling link: the checks run as root here, where file
  // permissions would not stop a read).
  TempDir tests;
  std::filesystem::create_symlink(tests.path() / "gone.cpp", tests.path() / "test_modeling_gone.cpp");
  check_fails("--tests-dir " + quoted(tests.path()), "test_modeling_gone.cpp: cannot open: No such file or directory");

  // Unterminated literals and malformed lists name the line.
  std::ofstream(tests.path() / "gone.cpp") << "struct T {\n  static constexpr const char* model_name = \"T\";\n"
                                              "  static constexpr tracetorch::testing::Skip skipped_tests[] = {{\"test_save_load\"}};\n};\n"
                                              "TRACETORCH_COMMON_MODEL_TESTS(T);\n";
  check_fails("--tests-dir " + quoted(tests.path()), "test_modeling_gone.cpp:3: T::skipped_tests entry: expected ',', found '}'");
  std::ofstream(tests.path() / "gone.cpp") << "struct T {\n  static constexpr const char* model_name = \"T;\n};\n";
  check_fails("--tests-dir " + quoted(tests.path()), "test_modeling_gone.cpp:2: unterminated string literal");
  std::ofstream(tests.path() / "gone.cpp") << "TRACETORCH_COMMON_MODEL_TESTS(Missing);\n";
  check_fails("--tests-dir " + quoted(tests.path()), "no struct Missing { ... } in this file");
}

/// Runs the scanner on `tests` with a bounded wait: `timeout` ends a scanner that hangs (exit 124).
tracetorch_test::RunResult scan_bounded(const TempDir& tests, const std::string& extra = "") {
  TempDir out;
  return run_program("timeout 60 " + kScanner, "--tests-dir " + quoted(tests.path()) + " --output_dir " + quoted(out.path()) + extra);
}

DOCTEST_TEST_CASE("tracetorch-scan-skipped: a FIFO named like a test file is refused at once, in one line") {
  TempDir tests;
  const auto fifo = tests.path() / "test_modeling_fifo.cpp";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto result = scan_bounded(tests);
  DOCTEST_CHECK_MESSAGE(result.exit_code == 2, result.output);
  DOCTEST_CHECK_MESSAGE(result.output.find("tracetorch-scan-skipped: " + fifo.string() +
                                           ": is a FIFO (named pipe), not a regular file: refused") != std::string::npos,
                        result.output);
}

DOCTEST_TEST_CASE("tracetorch-scan-skipped: a character literal never reads past the end of its line (ASan build)") {
  TempDir tests;
  const auto file = tests.path() / "test_modeling_lines.cpp";
  // A backslash at the end of line 2: the literal ends there, unterminated. The scanner skipped the
  // newline, read on into line 3, took `'` there as the closing quote and said nothing.
  std::ofstream(file) << "// a comment long enough for the text to live on the heap\nchar c = '\\\n';\n";
  auto result = scan_bounded(tests);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK_MESSAGE(result.output.find("test_modeling_lines.cpp:2: unterminated character literal") != std::string::npos,
                        result.output);
  // The backslash as the file's last byte: the scanner stepped one past the end of the text.
  std::ofstream(file) << "// a comment long enough for the text to live on the heap\nchar c = '\\";
  result = scan_bounded(tests);
  DOCTEST_CHECK_MESSAGE(result.output.find("test_modeling_lines.cpp:2: unterminated character literal") != std::string::npos,
                        result.output);
  // A file that begins with a number: the number's lexer read the byte before the text (under
  // ASan, a heap-buffer-overflow that ends the scanner).
  std::ofstream(file) << "0x10;  // a comment long enough for the text to live on the heap\n"
                         "struct T { static constexpr const char* model_name = \"Lines\"; };\n"
                         "TRACETORCH_COMMON_MODEL_TESTS(T);\n";
  result = scan_bounded(tests);
  DOCTEST_CHECK_MESSAGE(result.exit_code == 0, result.output);
  DOCTEST_CHECK(result.output.find("test_modeling_lines.cpp: Lines (skips 0)") != std::string::npos);
}

/// The scanner's work count (--print-work-steps) on a file of `testers` testers, each named by an
/// instantiation before its definition (the order that made each search run over the file).
std::uint64_t work_steps_for(int testers) {
  TempDir tests;
  std::string text;
  for (int i = 0; i < testers; ++i) text += "TRACETORCH_COMMON_MODEL_TESTS(T" + std::to_string(i) + ");\n";
  for (int i = 0; i < testers; ++i) {
    text += "struct T" + std::to_string(i) + " {\n  static constexpr const char* model_name = \"M" + std::to_string(i) +
            "\";\n  struct Inner { int x[2] = {1, 2}; };\n};\n";
  }
  std::ofstream(tests.path() / "test_modeling_many.cpp") << text;
  const auto result = scan_bounded(tests, " --print-work-steps");
  DOCTEST_REQUIRE_MESSAGE(result.exit_code == 0, result.output);
  const auto at = result.output.find("work steps: ");
  DOCTEST_REQUIRE(at != std::string::npos);
  return std::stoull(result.output.substr(at + 12));
}

DOCTEST_TEST_CASE("tracetorch-scan-skipped: its work is linear in the input (no timing: a count of steps)") {
  // Twice the testers, twice the text: linear work doubles (quadratic would quadruple). The
  // count is of characters lexed and tokens visited, so the bound is exact, not a timing.
  const auto one = work_steps_for(2000), two = work_steps_for(4000);
  DOCTEST_INFO("steps: " << one << " and " << two);
  DOCTEST_CHECK(two <= 2.1 * static_cast<double>(one));
  DOCTEST_CHECK(two >= 1.9 * static_cast<double>(one));
}

#endif  // TRACETORCH_SCAN_SKIPPED
