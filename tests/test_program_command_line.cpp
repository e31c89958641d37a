// tools/command_line.hpp: how llama_trace, tracetorch-diff and tracetorch-scan-skipped read
// their command lines.

#include <doctest/doctest.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "command_line.hpp"

namespace {

using tracetorch::command_line::ArgumentReader;
using tracetorch::command_line::parse_number;
using tracetorch::command_line::UsageError;

/// argv for a command line: "program" then `arguments`, kept alive with the strings.
struct CommandLineArgv {
  explicit CommandLineArgv(std::vector<std::string> arguments) : strings(std::move(arguments)) {
    strings.insert(strings.begin(), "program");
    for (auto& s : strings) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(strings.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

/// "name=value" per option that took one, "name" per argument that did not, in order.
std::vector<std::string> read_arguments(std::vector<std::string> arguments, const std::vector<std::string>& with_value) {
  CommandLineArgv line(std::move(arguments));
  std::vector<std::string> seen;
  for (ArgumentReader arg(line.argc(), line.argv()); arg.next();) {
    const bool takes_value = std::find(with_value.begin(), with_value.end(), arg.name()) != with_value.end();
    seen.push_back(takes_value ? arg.name() + "=" + arg.value() : arg.name());
  }
  return seen;
}

std::string argument_error_of(std::vector<std::string> arguments, const std::vector<std::string>& with_value) {
  try {
    read_arguments(std::move(arguments), with_value);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

/// What std::cout and std::cerr received while `body` ran.
template <class Body>
std::pair<std::string, std::string> program_output(Body body) {
  std::ostringstream out, err;
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  body();
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {out.str(), err.str()};
}

}  // namespace

DOCTEST_TEST_CASE("command line: an option's value follows it or is attached with =") {
  const auto seen = read_arguments({"--seed", "3", "--json=out.json", "ref", "--all", "cand", "--map=a=>b"},
                             {"--seed", "--json", "--map"});
  DOCTEST_CHECK(seen == std::vector<std::string>{"--seed=3", "--json=out.json", "ref", "--all", "cand", "--map=a=>b"});
  // A value may itself look like anything, a leading dash included.
  DOCTEST_CHECK(read_arguments({"--atol", "-1"}, {"--atol"}) == std::vector<std::string>{"--atol=-1"});
}

DOCTEST_TEST_CASE("command line: a missing value and a value for a plain flag are errors") {
  DOCTEST_CHECK(argument_error_of({"ref", "--json"}, {"--json"}) == "--json needs a value");
  DOCTEST_CHECK(argument_error_of({"--all=yes", "ref"}, {}) == "--all takes no value");
  DOCTEST_CHECK(argument_error_of({"ref", "--all=yes"}, {}) == "--all takes no value");  // the last argument too
  DOCTEST_CHECK(argument_error_of({"--json="}, {"--json"}) == "(no error)");  // an empty value is the caller's to judge
}

DOCTEST_TEST_CASE("command line: numbers are whole, in range, and finite") {
  DOCTEST_CHECK(parse_number<std::int64_t>("--batch", "4", 1) == 4);
  DOCTEST_CHECK(parse_number("--atol", "1e-5", 0.0) == doctest::Approx(1e-5));
  const auto error_of = [](auto parse) -> std::string {
    try {
      parse();
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  };
  DOCTEST_CHECK(error_of([] { parse_number<std::int64_t>("--batch", "0", 1); }) == "--batch needs an integer >= 1, got '0'");
  DOCTEST_CHECK(error_of([] { parse_number<std::int64_t>("--seq", "4x", 1); }) == "--seq needs an integer >= 1, got '4x'");
  DOCTEST_CHECK(error_of([] { parse_number<std::uint64_t>("--seed", "", 0); }) == "--seed needs an integer >= 0, got ''");
  DOCTEST_CHECK(error_of([] { parse_number("--rtol", "-0.5", 0.0); }) == "--rtol needs a finite number >= 0, got '-0.5'");
  DOCTEST_CHECK(error_of([] { parse_number("--atol", "inf", 0.0); }) == "--atol needs a finite number >= 0, got 'inf'");
  DOCTEST_CHECK(error_of([] { parse_number("--atol", "nan", 0.0); }) == "--atol needs a finite number >= 0, got 'nan'");
}

DOCTEST_TEST_CASE("command line: run_program's frame for --help, a bad line and a good one") {
  int parsed = 0, ran = 0;
  const auto parse = [&](int argc, char** argv) {
    ++parsed;
    int count = 0;
    for (ArgumentReader arg(argc, argv); arg.next();) {
      if (arg.name() != "ok") throw UsageError("unknown argument '" + arg.name() + "'");
      ++count;
    }
    return count;
  };
  const auto run = [&](int count) {
    ++ran;
    return 10 + count;
  };
  const auto call = [&](std::vector<std::string> arguments) {
    CommandLineArgv line(std::move(arguments));
    int status = -1;
    const auto [out, err] = program_output(
        [&] { status = tracetorch::command_line::run_program("prog", "usage: prog\n", line.argc(), line.argv(), parse, run); });
    return std::make_tuple(status, out, err);
  };

  // --help anywhere, even after an argument the program would refuse: the usage, exit 0, nothing parsed.
  const auto [help_status, help_out, help_err] = call({"bogus", "-h"});
  DOCTEST_CHECK(help_status == 0);
  DOCTEST_CHECK(help_out == "usage: prog\n");
  DOCTEST_CHECK(help_err.empty());
  DOCTEST_CHECK(parsed == 0);

  const auto [bad_status, bad_out, bad_err] = call({"ok", "bogus"});
  DOCTEST_CHECK(bad_status == 2);
  DOCTEST_CHECK(bad_out.empty());
  DOCTEST_CHECK(bad_err == "prog: unknown argument 'bogus'\n\nusage: prog\n");
  DOCTEST_CHECK(ran == 0);

  const auto [good_status, good_out, good_err] = call({"ok", "ok"});
  DOCTEST_CHECK(good_status == 12);
  DOCTEST_CHECK(ran == 1);
}
