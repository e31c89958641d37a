// tracetorch-scan-skipped: which models skip which common model tests, and why. transformers'
// utils/scan_skipped_tests.py for tracetorch/testing.hpp: it reads the model test files
// (test_modeling_*.cpp) as text, without building them, finds each
// TRACETORCH_COMMON_MODEL_TESTS(Tester) and the tester's model_name and skipped_tests, and writes
// a JSON summary in transformers' schema.
//
//   tracetorch-scan-skipped [--tests-dir DIR] [--output_dir DIR] [--test_method_name NAME]
//
// Exit status: 0 written, 2 a bad command line or a file it cannot read or understand.

#include <tracetorch/detail/python_json.hpp>
#include <tracetorch/detail/read_file.hpp>
#include <tracetorch/testing/common_tests.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

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

/// Bad input: the message names the file (and line) and the cause; exit 2.
struct ScanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Work done: characters lexed plus tokens visited by the parser. The scan is linear in its
/// input; --print-work-steps prints this count so that a test can check that without timing.
std::uint64_t work_steps = 0;

// ---------------------------------------------------------------------------------------------
// Reading C++ source as tokens: enough of the lexer to find literals outside comments.
// ---------------------------------------------------------------------------------------------

enum class TokenKind { identifier, string, punctuation, other };

struct Token {
  TokenKind kind;
  std::string text;  // a string literal's decoded value (UTF-8)
  int line;
};

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {}

  std::vector<Token> tokens() {
    work_steps += text_.size();  // each character is looked at a bounded number of times
    std::vector<Token> out;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (starts_with("//")) {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (starts_with("/*")) {
        const int start = line_;
        const auto end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) fail(start, "unterminated /* comment");
        count_lines(pos_, end + 2);
        pos_ = end + 2;
      } else if (const auto prefix = string_prefix(); prefix != std::string_view::npos) {
        out.push_back(string_literal(prefix));
      } else if (c == '\'') {
        skip_char_literal();
      } else if (is_identifier_start(c)) {
        const auto start = pos_;
        while (pos_ < text_.size() && is_identifier_char(text_[pos_])) ++pos_;
        out.push_back({TokenKind::identifier, std::string(text_.substr(start, pos_ - start)), line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        // A pp-number: digits, letters, '.', digit separators, and exponent signs.
        const auto start = pos_;
        while (pos_ < text_.size()) {
          const char d = text_[pos_];
          // The character before, within the number: at a file's first byte there is none (this
          // read text_[-1], one byte before the buffer, for a file that begins with a digit).
          const char prev = pos_ > start ? text_[pos_ - 1] : '\0';
          if (is_identifier_char(d) || d == '.' || (d == '\'' && pos_ + 1 < text_.size() && is_identifier_char(text_[pos_ + 1])) ||
              ((d == '+' || d == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P'))) {
            ++pos_;
          } else {
            break;
          }
        }
        out.push_back({TokenKind::other, std::string(text_.substr(start, pos_ - start)), line_});
      } else {
        out.push_back({TokenKind::punctuation, std::string(1, c), line_});
        ++pos_;
      }
    }
    return out;
  }

 private:
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  [[noreturn]] void fail(int line, const std::string& why) const {
    throw ScanError(where_ + ":" + std::to_string(line) + ": " + why);
  }

  void count_lines(std::size_t from, std::size_t to) {
    line_ += static_cast<int>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(from),
                                         text_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
  }

  /// The length of the encoding prefix (u8, u, U, L, each optionally followed by R) when a
  /// string literal starts here, else npos. An identifier like `uR` elsewhere is not a prefix.
  std::size_t string_prefix() const {
    if (pos_ > 0 && is_identifier_char(text_[pos_ - 1])) return std::string_view::npos;
    for (std::string_view prefix : {"u8R", "uR", "UR", "LR", "R", "u8", "u", "U", "L", ""}) {
      if (starts_with(prefix) && pos_ + prefix.size() < text_.size() && text_[pos_ + prefix.size()] == '"') {
        return prefix.size();
      }
    }
    return std::string_view::npos;
  }

  Token string_literal(std::size_t prefix_length) {
    const int start_line = line_;
    const bool raw = prefix_length > 0 && text_[pos_ + prefix_length - 1] == 'R';
    pos_ += prefix_length + 1;  // past the prefix and the opening quote
    std::string value;
    if (raw) {
      std::string closing = ")";  // ")delimiter\""
      std::size_t open = pos_;
      // At most 16 delimiter characters, none of them space, parenthesis or backslash (the
      // standard's rule): it also keeps the search for the closing sequence linear.
      for (; open < text_.size() && text_[open] != '(' && open - pos_ < 16; ++open) {
        const char d = text_[open];
        if (std::isspace(static_cast<unsigned char>(d)) || d == ')' || d == '\\') break;
        closing += d;
      }
      if (open >= text_.size() || text_[open] != '(') fail(start_line, "malformed raw string literal");
      closing += '"';
      const auto end = text_.find(closing, open + 1);
      if (end == std::string_view::npos) fail(start_line, "unterminated raw string literal");
      value = std::string(text_.substr(open + 1, end - open - 1));
      count_lines(pos_, end);
      pos_ = end + closing.size();
    } else {
      while (true) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start_line, "unterminated string literal");
        const char c = text_[pos_++];
        if (c == '"') break;
        if (c != '\\') {
          value += c;
          continue;
        }
        escape(value, start_line);
      }
    }
    return {TokenKind::string, std::move(value), start_line};
  }

  /// One escape sequence after the backslash, decoded into `out`.
  void escape(std::string& out, int line) {
    if (pos_ >= text_.size()) fail(line, "unterminated string literal");
    const char c = text_[pos_++];
    switch (c) {
      case 'n': out += '\n'; return;
      case 't': out += '\t'; return;
      case 'r': out += '\r'; return;
      case 'a': out += '\a'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'v': out += '\v'; return;
      case '\\': case '"': case '\'': case '?': out += c; return;
      case '\n': ++line_; return;  // a line continuation
      default: break;
    }
    const auto hex_digits = [&](std::size_t max) {
      std::uint32_t value = 0;
      std::size_t n = 0;
      while (n < max && pos_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
        const char d = text_[pos_];
        value = value * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(d)) ? d - '0' : (d | 0x20) - 'a' + 10);
        ++pos_;
        ++n;
      }
      return std::pair{value, n};
    };
    if (c == 'x') {
      const auto [value, n] = hex_digits(8);
      if (n == 0 || value > 0xFF) fail(line, "bad \\x escape in a string literal");
      out += static_cast<char>(value);
    } else if (c == 'u' || c == 'U') {
      const std::size_t want = c == 'u' ? 4 : 8;
      const auto [value, n] = hex_digits(want);
      if (n != want || value > 0x10FFFF) fail(line, std::string("bad \\") + c + " escape in a string literal");
      tracetorch::detail::append_utf8(out, value);  // python_repr.hpp's
    } else if (c >= '0' && c <= '7') {
      std::uint32_t value = static_cast<std::uint32_t>(c - '0');
      for (int k = 0; k < 2 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7'; ++k) {
        value = value * 8 + static_cast<std::uint32_t>(text_[pos_++] - '0');
      }
      out += static_cast<char>(value);
    } else {
      fail(line, std::string("unknown escape \\") + c + " in a string literal");
    }
  }

  void skip_char_literal() {
    const int start = line_;
    ++pos_;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start, "unterminated character literal");
      const char c = text_[pos_++];
      if (c == '\\') {
        // The escaped character must be on this line: a backslash at the end of a line (or of the
        // file) used to skip the newline, or step past the end, and go on reading the next line.
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail(start, "unterminated character literal");
        ++pos_;
      } else if (c == '\'') {
        return;
      }
    }
  }

  std::string_view text_;
  std::string where_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Finding testers in the tokens
// ---------------------------------------------------------------------------------------------

/// One TRACETORCH_COMMON_MODEL_TESTS instantiation: a model and the tests it skips.
struct ModelTests {
  std::string model;
  fs::path file;
  std::map<std::string, std::string> skipped;  // test -> reason
};

class TesterParser {
 public:
  TesterParser(std::vector<Token> tokens, std::string where) : t_(std::move(tokens)), where_(std::move(where)) {
    index_bodies();
  }

  // Linear in the tokens, whatever their number and order: one pass indexes every struct body,
  // a tester's body is read once however often it is named, and nested bodies are jumped over
  // (this searched the file from its start for every instantiation: quadratic).
  std::vector<ModelTests> parse() {
    std::vector<ModelTests> found;
    for (std::size_t i = 0; i < t_.size(); ++i) {
      ++work_steps;
      if (!is(i, TokenKind::identifier, "TRACETORCH_COMMON_MODEL_TESTS") || !is(i + 1, TokenKind::punctuation, "(")) continue;
      if (i >= 2 && is(i - 1, TokenKind::identifier, "define") && is(i - 2, TokenKind::punctuation, "#")) continue;
      // `Tester` or `ns::Tester`: names and colons up to the ')', nothing else.
      std::string tester;
      std::size_t k = i + 2;
      for (; k < t_.size() && (t_[k].kind == TokenKind::identifier || is_punct(k, ":")); ++k) {
        ++work_steps;
        if (t_[k].kind == TokenKind::identifier) tester = t_[k].text;  // the last name of ns::Tester
      }
      if (tester.empty() || !is_punct(k, ")")) fail(t_[i].line, "TRACETORCH_COMMON_MODEL_TESTS(...) names no tester");
      auto known = testers_.find(tester);
      if (known == testers_.end()) known = testers_.emplace(tester, read_tester(tester, t_[i].line)).first;
      found.push_back(known->second);
    }
    return found;
  }

 private:
  bool is(std::size_t i, TokenKind kind, std::string_view text) const {
    return i < t_.size() && t_[i].kind == kind && t_[i].text == text;
  }
  bool is_punct(std::size_t i, std::string_view text) const { return is(i, TokenKind::punctuation, text); }

  [[noreturn]] void fail(int line, const std::string& why) const {
    throw ScanError(where_ + ":" + std::to_string(line) + ": " + why);
  }
  std::string describe(std::size_t i) const {
    if (i >= t_.size()) return "the end of the file";
    return t_[i].kind == TokenKind::string ? "a string literal" : "'" + t_[i].text + "'";
  }
  int line_at(std::size_t i) const { return i < t_.size() ? t_[i].line : (t_.empty() ? 1 : t_.back().line); }

  static constexpr std::size_t npos = std::size_t(-1);

  /// One pass over the tokens: each '{' matched with its '}', and the first definition of each
  /// `struct Name {...}` / `class Name {...}` (a declaration `struct Name;` is not one).
  void index_bodies() {
    closing_.assign(t_.size(), npos);
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < t_.size(); ++i) {
      ++work_steps;
      if (is_punct(i, "{")) open.push_back(i);
      if (is_punct(i, "}") && !open.empty()) closing_[open.back()] = i, open.pop_back();
    }
    std::vector<std::size_t> next(t_.size() + 1, npos);  // the next '{' or ';' from each token
    for (std::size_t i = t_.size(); i-- > 0;) next[i] = is_punct(i, "{") || is_punct(i, ";") ? i : next[i + 1];
    for (std::size_t i = 0; i + 1 < t_.size(); ++i) {
      if (!(is(i, TokenKind::identifier, "struct") || is(i, TokenKind::identifier, "class")) ||
          t_[i + 1].kind != TokenKind::identifier) {
        continue;
      }
      const std::size_t k = next[i + 2];
      if (k != npos && is_punct(k, "{")) bodies_.emplace(t_[i + 1].text, k);  // keeps the first
    }
  }

  /// The body of `struct Name {...}` / `class Name {...}`: [open brace, close brace].
  std::pair<std::size_t, std::size_t> find_body(const std::string& name, int used_at) const {
    const auto found = bodies_.find(name);
    if (found == bodies_.end()) {
      fail(used_at, "TRACETORCH_COMMON_MODEL_TESTS(" + name + "): no struct " + name + " { ... } in this file");
    }
    const std::size_t k = found->second;
    if (closing_[k] == npos) fail(t_[k].line, "the body of " + name + " never closes");
    return {k, closing_[k]};
  }

  /// One or more adjacent string literals from `i`, concatenated; `i` moves past them.
  std::string strings(std::size_t& i, const std::string& what) const {
    if (i >= t_.size() || t_[i].kind != TokenKind::string) {
      fail(line_at(i), what + ": expected a string literal, found " + describe(i));
    }
    std::string value;
    while (i < t_.size() && t_[i].kind == TokenKind::string) value += t_[i++].text;
    return value;
  }

  void expect(std::size_t& i, std::string_view punct, const std::string& what) const {
    if (!is_punct(i, punct)) fail(line_at(i), what + ": expected '" + std::string(punct) + "', found " + describe(i));
    ++i;
  }

  /// `.test =` / `.reason =` of a designated initializer, when written.
  void designator(std::size_t& i, std::string_view field, const std::string& what) const {
    if (!is_punct(i, ".")) return;
    if (!is(i + 1, TokenKind::identifier, field) || !is_punct(i + 2, "=")) {
      fail(line_at(i), what + ": expected ." + std::string(field) + " =");
    }
    i += 3;
  }

  ModelTests read_tester(const std::string& name, int used_at) const {
    const auto [open, close] = find_body(name, used_at);
    ModelTests model;
    bool have_name = false;
    for (std::size_t i = open + 1; i < close; ++i) {
      ++work_steps;
      if (is_punct(i, "{")) {
        i = closing_[i];  // a nested body or initializer: not this struct's own members
        continue;
      }
      if (t_[i].kind != TokenKind::identifier) continue;
      if (t_[i].text == "model_name" && (is_punct(i + 1, "=") || is_punct(i + 1, "{"))) {
        const bool braced = is_punct(i + 1, "{");
        std::size_t k = i + 2;
        model.model = strings(k, name + "::model_name");
        if (braced) expect(k, "}", name + "::model_name");
        expect(k, ";", name + "::model_name");
        have_name = true;
      } else if (t_[i].text == "skipped_tests" && is_punct(i + 1, "[")) {
        model.skipped = read_skips(i, name);
      }
    }
    if (!have_name || model.model.empty()) {
      fail(used_at, name + " has no `static constexpr const char* model_name = \"...\";` (a non-empty string literal)");
    }
    return model;
  }

  /// `skipped_tests[] = { {"test", "reason"}, ... };` starting at the name.
  std::map<std::string, std::string> read_skips(std::size_t i, const std::string& tester) const {
    const std::string what = tester + "::skipped_tests";
    std::size_t k = i + 1;
    expect(k, "[", what);
    while (k < t_.size() && t_[k].kind == TokenKind::other) ++k;  // an explicit size
    expect(k, "]", what);
    if (is_punct(k, "=")) ++k;
    expect(k, "{", what);
    std::map<std::string, std::string> skips;
    if (is_punct(k, "}")) fail(line_at(k), what + " is empty (a zero-length array does not compile): leave it out");
    while (true) {
      const int line = line_at(k);
      expect(k, "{", what + " entry");
      designator(k, "test", what);
      std::string test = strings(k, what + " entry (the test name)");
      expect(k, ",", what + " entry");
      designator(k, "reason", what);
      std::string reason = strings(k, what + " entry (the reason)");
      if (is_punct(k, ",")) ++k;
      expect(k, "}", what + " entry");
      if (!tracetorch::testing::is_common_test(test)) {
        fail(line, what + ": \"" + test + "\" is not a common test (see tracetorch::testing::common_test_names)");
      }
      if (reason.empty()) fail(line, what + ": the skip of " + test + " has no reason");
      if (!skips.emplace(test, reason).second) fail(line, what + ": " + test + " is skipped twice");
      if (is_punct(k, ",")) ++k;
      if (is_punct(k, "}")) break;
    }
    ++k;
    expect(k, ";", what);
    return skips;
  }

  std::vector<Token> t_;
  std::string where_;
  std::vector<std::size_t> closing_;               // for each '{': its '}', else npos
  std::map<std::string, std::size_t> bodies_;      // struct name -> its body's '{'
  std::map<std::string, ModelTests> testers_;      // read once each
};

/// A test file's text: the shared check (a FIFO, socket or device is refused, not opened for
/// reading; at most kMaxSourceBytes), worded as this tool's other errors.
std::string read_file(const fs::path& path) {
  try {
    return tracetorch::detail::read_regular_file(path, tracetorch::detail::kMaxSourceBytes, "a test file");
  } catch (const tracetorch::detail::FileRefused& e) {
    throw ScanError(path.string() + ": " + e.cause());
  }
}

/// The model test files under `dir`, sorted by path.
std::vector<fs::path> model_test_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ScanError(dir.string() + ": no such directory");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // Directories are walked, not read; anything else so named is read_file's to accept or refuse.
    std::error_code type_ec;  // a dangling link is not a directory: read_file says what it is
    if (name.starts_with("test_modeling_") && name.ends_with(".cpp") && !it->is_directory(type_ec)) files.push_back(it->path());
  }
  if (ec) throw ScanError(dir.string() + ": cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// ---------------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------------

struct TestSummary {
  std::vector<std::string> ran, skipped, reasons;  // sorted
};

TestSummary summarize(std::string_view test, const std::vector<ModelTests>& models) {
  TestSummary s;
  for (const auto& model : models) {
    const auto found = model.skipped.find(std::string(test));
    if (found == model.skipped.end()) {
      s.ran.push_back(model.model);
    } else {
      s.skipped.push_back(model.model);
      s.reasons.push_back(model.model + ": " + found->second);
    }
  }
  std::sort(s.ran.begin(), s.ran.end());
  std::sort(s.skipped.begin(), s.skipped.end());
  std::sort(s.reasons.begin(), s.reasons.end());
  return s;
}

/// Python's round(x, 4): the correctly rounded decimal (ties to even on the exact binary value,
/// as printf does), read back as a double.
double round4(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.4f", x);
  return std::strtod(text, nullptr);
}

double proportion(std::size_t skipped, std::size_t total) {
  return total == 0 ? 0.0 : round4(static_cast<double>(skipped) / static_cast<double>(total));
}

boost::json::array json_strings(const std::vector<std::string>& items) {
  boost::json::array array;
  for (const auto& item : items) array.emplace_back(item);
  return array;
}

boost::json::object summary_json(const TestSummary& s, bool with_origin) {
  boost::json::object entry;
  if (with_origin) entry["origin"] = "common";
  entry["models_ran"] = json_strings(s.ran);
  entry["models_skipped"] = json_strings(s.skipped);
  entry["skipped_proportion"] = proportion(s.skipped.size(), s.ran.size() + s.skipped.size());
  entry["reasons_skipped"] = json_strings(s.reasons);
  return entry;
}

/// Written as Python's json.dump(data, f, indent=2) writes it.
fs::path write_json(const fs::path& path, const boost::json::object& data) {
  std::string text;
  tracetorch::detail::append_python_json(text, data, 0, false);
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw ScanError(path.string() + ": cannot write the file");
  return fs::absolute(path);
}

void print_counts(std::size_t ran, std::size_t skipped) {
  const std::size_t total = ran + skipped;
  const double percent = total == 0 ? 0.0 : 100.0 * static_cast<double>(skipped) / static_cast<double>(total);
  std::printf("Ran : %zu/%zu\n", ran, total);
  std::printf("Skipped : %zu/%zu (%.1f%%)\n", skipped, total, percent);
}

void print_reasons(const std::vector<std::string>& reasons) {
  constexpr std::size_t kShown = 10;
  for (std::size_t i = 0; i < reasons.size() && i < kShown; ++i) std::printf("- %s\n", reasons[i].c_str());
  if (reasons.size() > kShown) std::printf("- ... (%zu more in the JSON)\n", reasons.size() - kShown);
}

struct Options {
  fs::path tests_dir = "tests/models";
  fs::path output_dir = ".";
  std::string test_method_name;
  bool print_work_steps = false;  // for the tests: the scan's work count, on stderr
};

Options parse_command_line(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) throw ScanError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--tests-dir" || arg == "--tests_dir") {
      options.tests_dir = take();
    } else if (arg == "--output_dir" || arg == "--output-dir") {
      options.output_dir = take();
    } else if (arg == "--print-work-steps") {
      options.print_work_steps = true;
    } else if (arg == "--test_method_name" || arg == "--test-method-name") {
      options.test_method_name = take();
      if (!tracetorch::testing::is_common_test(options.test_method_name)) {
        throw ScanError("--test_method_name: \"" + options.test_method_name +
                        "\" is not a common test (see tracetorch::testing::common_test_names)");
      }
    } else {
      throw ScanError((arg.starts_with("-") ? "unknown option " : "unexpected argument ") + arg);
    }
  }
  return options;
}

int scan(const Options& options) {
  const auto files = model_test_files(options.tests_dir);
  std::printf("Parsing %zu model test files...\n", files.size());
  std::vector<ModelTests> models;
  std::map<std::string, fs::path> model_files;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string where = files[i].string();
    auto found = TesterParser(Lexer(read_file(files[i]), where).tokens(), where).parse();
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

  std::error_code ec;
  fs::create_directories(options.output_dir, ec);
  if (!fs::is_directory(options.output_dir)) {
    throw ScanError(options.output_dir.string() + ": cannot create the output directory" + (ec ? ": " + ec.message() : ""));
  }

  if (!options.test_method_name.empty()) {
    const auto summary = summarize(options.test_method_name, models);
    boost::json::object data;
    data[options.test_method_name] = summary_json(summary, /*with_origin=*/false);
    std::printf("== %s ==\n", options.test_method_name.c_str());
    print_counts(summary.ran.size(), summary.skipped.size());
    print_reasons(summary.reasons);
    const auto path = write_json(options.output_dir / ("scan_" + options.test_method_name + ".json"), data);
    std::printf("JSON saved to %s\n", path.string().c_str());
    return 0;
  }

  std::vector<std::string> tests(std::begin(tracetorch::testing::common_test_names),
                                 std::end(tracetorch::testing::common_test_names));
  std::sort(tests.begin(), tests.end());
  std::printf("Aggregating %zu tests...\n", tests.size());
  boost::json::object data;
  std::size_t ran = 0, skipped = 0;
  std::vector<std::string> reasons;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    std::printf("  (%zu/%zu) %s\n", i + 1, tests.size(), tests[i].c_str());
    const auto summary = summarize(tests[i], models);
    ran += summary.ran.size();
    skipped += summary.skipped.size();
    for (const auto& reason : summary.reasons) reasons.push_back(tests[i] + ": " + reason);
    data[tests[i]] = summary_json(summary, /*with_origin=*/true);
  }
  std::printf("== all %zu common tests, %zu models ==\n", tests.size(), models.size());
  print_counts(ran, skipped);
  print_reasons(reasons);
  const auto path = write_json(options.output_dir / "all_tests_scan_result.json", data);
  std::printf("JSON saved to %s\n", path.string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  Options options;
  try {
    options = parse_command_line(argc, argv);
  } catch (const ScanError& e) {
    std::cerr << "tracetorch-scan-skipped: " << e.what() << "\n" << kUsage;
    return 2;
  }
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
