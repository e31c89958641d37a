#pragma once
/// \file
/// Finding testers in a test file's tokens for tracetorch-scan-skipped: each
/// TRACETORCH_COMMON_MODEL_TESTS(Tester), and that tester's model_name and skipped_tests.

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tracetorch/testing/common_test_names.hpp>  // is_common_test

#include "common.hpp"
#include "source_lexer.hpp"

namespace tracetorch::scan_skipped {

/// One TRACETORCH_COMMON_MODEL_TESTS instantiation: a model and the tests it skips.
struct ModelTests {
  std::string model;
  std::filesystem::path file;
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

}  // namespace tracetorch::scan_skipped
