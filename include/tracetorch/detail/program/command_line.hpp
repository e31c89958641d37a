#pragma once
/// \file
/// What the command-line programs share (the trace programs of tracetorch/trace_program.hpp,
/// tracetorch-diff, tracetorch-scan-skipped): argv read one argument at a time, an option's
/// value and numbers, and main()'s frame for --help and a bad command line. No LibTorch: the
/// scanner builds without it. tools/command_line.hpp names these for the tools.

#include <charconv>
#include <cmath>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace tracetorch::detail::command_line {

/// A command line the program cannot use: printed with the usage, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// argv, one argument at a time. An option's value is the argument after it, or follows `=`
/// in the same argument (`--seed=3`); a value given so to an option that takes none is an error.
class ArgumentReader {
 public:
  ArgumentReader(int argc, char** argv) : argc_(argc), argv_(argv) {}

  /// Moves to the next argument; false after the last.
  bool next() {
    if (attached_ && !value_taken_) throw UsageError(name_ + " takes no value");
    if (++index_ >= argc_) return false;
    name_ = argv_[index_];
    attached_.reset();
    value_taken_ = false;
    if (const auto equals = name_.find('='); name_.starts_with("--") && equals != std::string::npos) {
      attached_ = name_.substr(equals + 1);
      name_.resize(equals);
    }
    return true;
  }

  /// The current argument, without an attached `=value`.
  const std::string& name() const { return name_; }
  bool is_option() const { return name_.starts_with("-"); }

  /// The current option's value; UsageError "NAME needs a value" when the line ends first.
  std::string value() {
    value_taken_ = true;
    if (attached_) return *attached_;
    if (index_ + 1 >= argc_) throw UsageError(name_ + " needs a value");
    return argv_[++index_];
  }

 private:
  int argc_;
  char** argv_;
  int index_ = 0;  // argv[0] is the program
  std::string name_;
  std::optional<std::string> attached_;
  bool value_taken_ = false;
};

/// `text` as a number of at least `minimum`, all of it (a floating-point one also finite);
/// UsageError "NAME needs an integer >= 1, got 'x'" (or "a finite number") otherwise.
template <class Number>
Number parse_number(std::string_view name, const std::string& text, Number minimum) {
  static_assert(std::is_arithmetic_v<Number>);
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool valid = error == std::errc() && end == text.data() + text.size() && !(value < minimum);
  if constexpr (std::is_floating_point_v<Number>) valid = valid && std::isfinite(value);
  if (!valid) {
    char shortest[32];
    const auto printed = std::to_chars(shortest, shortest + sizeof shortest, minimum).ptr;
    throw UsageError(std::string(name) + (std::is_integral_v<Number> ? " needs an integer >= " : " needs a finite number >= ") +
                     std::string(shortest, printed) + ", got '" + text + "'");
  }
  return value;
}

/// main()'s frame: `--help` or `-h` anywhere prints `usage` (exit 0); otherwise `parse(argc,
/// argv)` reads the command line, a UsageError from it printed as "PROGRAM: what" and the
/// usage on stderr (exit 2), and `run(parsed)` gives the exit status.
template <class Parse, class Run>
int run_program(std::string_view program, std::string_view usage, int argc, char** argv, Parse parse, Run run) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::cout << usage;
      return 0;
    }
  }
  std::optional<std::invoke_result_t<Parse&, int, char**>> parsed;
  try {
    parsed.emplace(parse(argc, argv));
  } catch (const UsageError& e) {
    std::cerr << program << ": " << e.what() << "\n\n" << usage;
    return 2;
  }
  return run(*parsed);
}

}  // namespace tracetorch::detail::command_line
