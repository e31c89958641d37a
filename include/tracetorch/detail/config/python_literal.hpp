#pragma once
/// \file
/// A Python literal as a command line gives it (`True`, `None`, `1e-6`, `'gelu'`, `[1, 2]`,
/// `(1, 2)`, `{'factor': 8.0}`) or JSON text, parsed into a boost::json::value: what
/// set_config_field (tracetorch/config_file.hpp) converts like a config.json value.

#include <boost/json.hpp>

#include <cctype>
#include <string>
#include <string_view>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

class JsonLiteralParser {
 public:
  explicit JsonLiteralParser(std::string_view text) : text_(text) {}

  boost::json::value parse() {
    boost::json::value value = parse_value();
    skip_space();
    if (at_ < text_.size()) fail("unexpected text after the value");
    return value;
  }

 private:
  boost::json::value parse_value() {
    skip_space();
    if (at_ >= text_.size()) fail("a value is missing");
    const char c = text_[at_];
    if (c == '[' || c == '(') return parse_list(c == '[' ? ']' : ')');
    if (c == '{') return parse_dict();
    if (c == '\'' || c == '"') return parse_string(c);
    if (std::isalpha(static_cast<unsigned char>(c))) return parse_word();
    return parse_number();
  }

  boost::json::value parse_list(char close) {
    ++at_;
    boost::json::array items;
    while (!consume(close)) {
      items.push_back(parse_value());
      if (!consume(',')) {
        if (!consume(close)) fail(std::string("expected ',' or '") + close + "'");
        break;
      }
    }
    return items;
  }

  boost::json::value parse_dict() {
    ++at_;
    boost::json::object object;
    while (!consume('}')) {
      const boost::json::value key = parse_value();
      if (!key.is_string()) fail("a dict key must be a string");
      if (!consume(':')) fail("expected ':'");
      object[key.get_string()] = parse_value();
      if (!consume(',')) {
        if (!consume('}')) fail("expected ',' or '}'");
        break;
      }
    }
    return object;
  }

  boost::json::value parse_string(char quote) {
    std::string out;
    for (++at_; at_ < text_.size() && text_[at_] != quote; ++at_) {
      if (text_[at_] == '\\' && at_ + 1 < text_.size()) ++at_;  // \' \" \\ stand for the character
      out += text_[at_];
    }
    if (at_ >= text_.size()) fail("a string is not closed");
    ++at_;
    return boost::json::value(out);
  }

  boost::json::value parse_word() {
    const std::size_t start = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) ++at_;
    const std::string_view word = text_.substr(start, at_ - start);
    if (word == "True" || word == "true") return true;
    if (word == "False" || word == "false") return false;
    if (word == "None" || word == "null") return nullptr;
    fail("\"" + std::string(word) + "\" is not a literal (quote a string: 'text')");
  }

  boost::json::value parse_number() {
    const std::size_t start = at_;
    while (at_ < text_.size() && std::string_view("+-.eE0123456789").find(text_[at_]) != std::string_view::npos) ++at_;
    boost::system::error_code ec;
    boost::json::value value = boost::json::parse(text_.substr(start, at_ - start), ec);
    if (ec || start == at_ || !value.is_number()) fail("not a number");
    return value;
  }

  bool consume(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("tracetorch: the literal `" + std::string(text_) + "`: " + why + " (at character " + std::to_string(at_) + ")");
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

/// `text` as a JSON value; throws Error naming the literal when it is not one.
inline boost::json::value parse_python_literal_as_json(std::string_view text) { return JsonLiteralParser(text).parse(); }

}  // namespace tracetorch::detail
