// include/tracetorch/diff/rules_file.hpp (rules_file::read, behind load_accept_rules and
// load_arg_names_rules) and tools/tracetorch_diff.cpp (--accept, --arg-names): a rules file is
// read only where it is a regular file of at most kMaxRulesFileBytes. A FIFO, a directory or an
// oversized file is refused at once with a message naming it, and the tool exits 2 (issue 26,
// item 2: before, a FIFO given as --accept made the tool wait forever).

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "test_helpers.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using tracetorch_test::TempDir;

using tracetorch_test::contains;

std::string refusal(const fs::path& path, bool accept) {
  try {
    if (accept) {
      tracetorch::load_accept_rules(path);
    } else {
      tracetorch::load_arg_names_rules(path);
    }
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  return "read";
}

}  // namespace

DOCTEST_TEST_SUITE("diff rules files") {

DOCTEST_TEST_CASE("a rules file that is a FIFO, a directory or over 16 MiB is refused without reading it, exit 2") {
  TempDir dir;
  const auto fifo = dir / "rules.fifo";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto folder = dir / "rules.d";
  fs::create_directories(folder);
  const auto huge = dir / "huge.txt";
  { std::ofstream(huge) << "M values reviewed\n"; }
  fs::resize_file(huge, tracetorch::detail::rules_file::kMaxRulesFileBytes + 1);  // sparse: no 16 MiB written
  const auto good = dir / "good.txt";
  { std::ofstream(good) << "M values reviewed\n"; }

  for (const bool accept : {true, false}) {
    DOCTEST_INFO("rules for " << (accept ? "--accept" : "--arg-names"));
    DOCTEST_CHECK(contains(refusal(fifo, accept), fifo.string() + ": is a FIFO (named pipe), not a regular file: refused"));
    DOCTEST_CHECK(contains(refusal(folder, accept), folder.string() + ": is a directory, not a file"));
    DOCTEST_CHECK(contains(refusal(huge, accept), huge.string() + ": is 16777217 bytes, more than the limit of 16777216 bytes for a rules file"));
    DOCTEST_CHECK(contains(refusal(dir / "absent.txt", accept), (dir / "absent.txt").string() + ": cannot open: No such file"));
  }
  DOCTEST_CHECK(refusal(good, true) == "read");
  DOCTEST_CHECK(tracetorch::load_accept_rules(good).size() == 1);

#ifdef TRACETORCH_DIFF
  // Any trace pair will do: the rules are read first. `timeout` bounds the test if a FIFO were opened.
  const auto trace = tracetorch_test::data_dir() / "diff" / "eps_layer2";
  for (const std::string option : {"--accept", "--arg-names"}) {
    for (const auto& rules : {fifo, folder}) {
      const auto result = tracetorch_test::run_program(
          "timeout 30 " + std::string(TRACETORCH_DIFF), trace.string() + " " + trace.string() + " " + option + " " + rules.string());
      DOCTEST_INFO(option << " " << rules << ": " << result.output);
      DOCTEST_CHECK(result.exit_code == 2);
      DOCTEST_CHECK(contains(result.output, rules.string() + ": is a "));
    }
  }
#endif
}

}  // DOCTEST_TEST_SUITE
