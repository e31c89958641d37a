#pragma once
/// \file
/// The one reader of Python literals (no LibTorch): None, True, False, integers (with `_`),
/// floats, 'strings' and "strings" with Python's escapes, tuples, lists and dicts with string
/// keys, nested up to 64 levels. `--call KEY=VALUE` and a trace's reprs read it into
/// module/python_value.hpp's PythonValue, `set_config_field` into JSON (config/python_literal.hpp).

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace tracetorch::detail {

/// A Python literal, as read.
struct PythonLiteral {
  enum class Kind { none, boolean, integer, floating, string, sequence, mapping };
  Kind kind = Kind::none;
  bool boolean = false;
  std::int64_t integer = 0;
  double floating = 0;
  std::string text;  ///< a string's characters
  /// A sequence's elements (keys "0", "1", ...) or a mapping's entries, in order.
  std::vector<std::pair<std::string, PythonLiteral>> items;
};

/// Reads one literal; nullopt where the text is not one, with why() saying what is wrong and
/// where (the caller decides whether that is an object's repr or an error).
class PythonLiteralParser {
 public:
  /// `json_words`: also take JSON's true, false and null (config values may be written either way).
  explicit PythonLiteralParser(std::string_view text, bool json_words = false) : text_(text), json_words_(json_words) {}

  std::optional<PythonLiteral> parse() {
    auto value = parse_value(0);
    skip_spaces();
    if (value && at_ != text_.size()) return fail("unexpected text after the value");
    return value;
  }
  /// Why parse() returned nullopt: "expected ',' or ']' (at character 4)".
  const std::string& why() const noexcept { return why_; }

 private:
  using Kind = PythonLiteral::Kind;
  static constexpr std::size_t kMaxDepth = 64;

  std::nullopt_t fail(const std::string& what) {
    if (why_.empty()) why_ = what + " (at character " + std::to_string(at_) + ")";
    return std::nullopt;
  }
  void skip_spaces() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
  }
  bool consume(char c) {
    skip_spaces();
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }

  std::optional<PythonLiteral> parse_value(std::size_t depth) {
    skip_spaces();
    if (at_ >= text_.size()) return fail("a value is missing");
    if (depth > kMaxDepth) return fail("nested too deep");
    const char c = text_[at_];
    if (c == '(' || c == '[') return parse_sequence(c == '(' ? ')' : ']', depth);
    if (c == '{') return parse_mapping(depth);
    if (c == '\'' || c == '"') return parse_string();
    if (std::isalpha(static_cast<unsigned char>(c)) != 0) return parse_word();
    return parse_number();
  }

  std::optional<PythonLiteral> parse_sequence(char close, std::size_t depth) {
    ++at_;
    PythonLiteral out;
    out.kind = Kind::sequence;
    bool comma = false;  // `(1)` is 1, `(1,)` a tuple
    while (!consume(close)) {
      auto element = parse_value(depth + 1);
      if (!element) return std::nullopt;
      out.items.emplace_back(std::to_string(out.items.size()), std::move(*element));
      if (consume(',')) {
        comma = true;
      } else if (!consume(close)) {
        return fail(std::string("expected ',' or '") + close + "'");
      } else {
        break;
      }
    }
    if (close == ')' && out.items.size() == 1 && !comma) return std::move(out.items[0].second);
    return out;
  }

  std::optional<PythonLiteral> parse_mapping(std::size_t depth) {
    ++at_;
    PythonLiteral out;
    out.kind = Kind::mapping;
    while (!consume('}')) {
      auto key = parse_value(depth + 1);
      if (!key) return std::nullopt;
      if (key->kind != Kind::string) return fail("a dict key must be a string");
      if (!consume(':')) return fail("expected ':'");
      auto value = parse_value(depth + 1);
      if (!value) return std::nullopt;
      out.items.emplace_back(std::move(key->text), std::move(*value));
      if (!consume(',')) {
        if (!consume('}')) return fail("expected ',' or '}'");
        break;
      }
    }
    return out;
  }

  std::optional<PythonLiteral> parse_string() {
    const char quote = text_[at_++];
    PythonLiteral out;
    out.kind = Kind::string;
    while (at_ < text_.size() && text_[at_] != quote) {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) break;
        const char e = text_[at_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == '0' ? '\0' : e;
      }
      out.text += c;
    }
    if (at_ >= text_.size()) return fail("a string is not closed");
    ++at_;
    return out;
  }

  std::optional<PythonLiteral> parse_word() {
    const std::size_t start = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) != 0 || text_[at_] == '_')) ++at_;
    const std::string_view word = text_.substr(start, at_ - start);
    PythonLiteral out;
    if (word == "None" || (json_words_ && word == "null")) return out;
    out.kind = Kind::boolean;
    out.boolean = word == "True" || (json_words_ && word == "true");
    if (out.boolean || word == "False" || (json_words_ && word == "false")) return out;
    at_ = start;
    return fail("\"" + std::string(word) + "\" is not a literal (quote a string: 'text')");
  }

  std::optional<PythonLiteral> parse_number() {
    std::size_t end = at_;
    while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) != 0 ||
                                  std::string_view("+-._").find(text_[end]) != std::string_view::npos)) {
      ++end;
    }
    std::string token(text_.substr(at_, end - at_));
    std::erase(token, '_');
    if (token.empty()) return fail("not a value");
    const char* first = token.data() + (token[0] == '+' ? 1 : 0);
    const char* last = token.data() + token.size();
    PythonLiteral out;
    if (const auto [ptr, ec] = std::from_chars(first, last, out.integer); ec == std::errc() && ptr == last) {
      out.kind = Kind::integer;
    } else if (const auto [fptr, fec] = std::from_chars(first, last, out.floating);
               fec == std::errc() && fptr == last && std::isfinite(out.floating) &&
               token.find_first_of("0123456789") != std::string::npos) {
      out.kind = Kind::floating;
    } else {
      return fail("not a number");
    }
    at_ = end;
    return out;
  }

  std::string_view text_;
  bool json_words_;
  std::size_t at_ = 0;
  std::string why_;
};

}  // namespace tracetorch::detail
