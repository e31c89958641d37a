#pragma once
/// \file
/// A Python value as a trace program or a replay hands it to a forward: a literal of the command
/// line (`--call use_cache=False`), a repr recorded in a trace, or a tensor read from a file.
/// Only what `ast.literal_eval` reads for these is parsed: None, True, False, integers, floats,
/// strings, tuples and lists; any other repr (`DynamicCache(...)`) stays an object of that repr.

#include <torch/torch.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/repr/string_repr.hpp"

namespace tracetorch::detail {

struct PythonValue {
  enum class Kind { none, boolean, integer, floating, string, sequence, mapping, tensor, object };
  Kind kind = Kind::none;
  bool boolean = false;
  std::int64_t integer = 0;
  double floating = 0;
  std::string text;  ///< a string's characters, or an object's repr
  torch::Tensor tensor;
  /// A sequence's elements (keys "0", "1", ...) or a mapping's entries, in order.
  std::vector<std::pair<std::string, PythonValue>> items;

  static PythonValue of_tensor(torch::Tensor value) {
    PythonValue out;
    out.kind = value.defined() ? Kind::tensor : Kind::none;
    out.tensor = std::move(value);
    return out;
  }
  static PythonValue of_object(std::string repr) {
    PythonValue out;
    out.kind = Kind::object;
    out.text = std::move(repr);
    return out;
  }
};

/// What a value is, for messages: "None", "True", "3", "a tensor [2, 7] torch.float32", "a tuple of 2".
inline std::string describe_python_value(const PythonValue& value) {
  using Kind = PythonValue::Kind;
  switch (value.kind) {
    case Kind::none: return "None";
    case Kind::boolean: return value.boolean ? "True" : "False";
    case Kind::integer: return std::to_string(value.integer);
    case Kind::floating: return python_float_repr(value.floating);
    case Kind::string: return python_string_repr(value.text);
    case Kind::sequence: return "a sequence of " + std::to_string(value.items.size());
    case Kind::mapping: return "a mapping of " + std::to_string(value.items.size()) + " entries";
    case Kind::tensor: {
      std::string shape;
      for (const auto size : value.tensor.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
      return "a tensor [" + shape + "] " + std::string(c10::toString(value.tensor.scalar_type()));
    }
    case Kind::object: return "the object " + value.text.substr(0, 80);
  }
  return "?";
}

/// Reads one Python literal; nullopt where the text is not one (then the caller decides whether
/// it is an object's repr or an error).
class PythonLiteralParser {
 public:
  explicit PythonLiteralParser(std::string_view text) : text_(text) {}

  std::optional<PythonValue> parse() {
    auto value = parse_value(0);
    skip_spaces();
    if (!value || at_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  static constexpr std::size_t kMaxDepth = 64;

  void skip_spaces() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
  }
  bool take(std::string_view word) {
    if (text_.substr(at_).starts_with(word)) {
      at_ += word.size();
      return true;
    }
    return false;
  }

  std::optional<PythonValue> parse_value(std::size_t depth) {
    skip_spaces();
    if (at_ >= text_.size() || depth > kMaxDepth) return std::nullopt;
    PythonValue out;
    const char c = text_[at_];
    if (c == '(' || c == '[') return parse_sequence(c == '(' ? ')' : ']', depth);
    if (c == '\'' || c == '"') return parse_string();
    for (const auto& [word, kind, flag] : {std::tuple{"None", PythonValue::Kind::none, false},
                                           std::tuple{"True", PythonValue::Kind::boolean, true},
                                           std::tuple{"False", PythonValue::Kind::boolean, false}}) {
      if (take(word)) {
        out.kind = kind;
        out.boolean = flag;
        return out;
      }
    }
    return parse_number();
  }

  std::optional<PythonValue> parse_sequence(char close, std::size_t depth) {
    ++at_;
    PythonValue out;
    out.kind = PythonValue::Kind::sequence;
    bool comma = false;  // `(1)` is 1, `(1,)` a tuple
    for (;;) {
      skip_spaces();
      if (at_ < text_.size() && text_[at_] == close) {
        ++at_;
        break;
      }
      auto element = parse_value(depth + 1);
      if (!element) return std::nullopt;
      out.items.emplace_back(std::to_string(out.items.size()), std::move(*element));
      skip_spaces();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        comma = true;
      } else if (at_ >= text_.size() || text_[at_] != close) {
        return std::nullopt;
      }
    }
    if (close == ')' && out.items.size() == 1 && !comma) return std::move(out.items[0].second);
    return out;
  }

  std::optional<PythonValue> parse_string() {
    const char quote = text_[at_++];
    PythonValue out;
    out.kind = PythonValue::Kind::string;
    while (at_ < text_.size() && text_[at_] != quote) {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) return std::nullopt;
        const char e = text_[at_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == '0' ? '\0' : e;
      }
      out.text += c;
    }
    if (at_ >= text_.size()) return std::nullopt;
    ++at_;
    return out;
  }

  std::optional<PythonValue> parse_number() {
    std::size_t end = at_;
    while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) != 0 ||
                                  std::string_view("+-._").find(text_[end]) != std::string_view::npos)) {
      ++end;
    }
    std::string token(text_.substr(at_, end - at_));
    std::erase(token, '_');
    if (token.empty()) return std::nullopt;
    const char* first = token.data() + (token[0] == '+' ? 1 : 0);
    const char* last = token.data() + token.size();
    PythonValue out;
    if (const auto [ptr, ec] = std::from_chars(first, last, out.integer); ec == std::errc() && ptr == last) {
      out.kind = PythonValue::Kind::integer;
    } else if (const auto [fptr, fec] = std::from_chars(first, last, out.floating);
               fec == std::errc() && fptr == last && std::isfinite(out.floating) &&
               token.find_first_of("0123456789") != std::string::npos) {
      out.kind = PythonValue::Kind::floating;
    } else {
      return std::nullopt;
    }
    at_ = end;
    return out;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

/// `text` as a Python literal, or tracetorch::Error "`what`: 'text' is not a Python literal ...".
inline PythonValue parse_python_literal(std::string_view text, std::string_view what) {
  if (auto value = PythonLiteralParser(text).parse()) return std::move(*value);
  throw Error(std::string(what) + ": '" + std::string(text.substr(0, 200)) +
              "' is not a Python literal (None, True, False, a number, a 'string', a tuple or a list)");
}

/// A repr as a trace records it: the literal it spells, else an object of that repr.
inline PythonValue python_value_from_repr(std::string_view repr) {
  if (auto value = PythonLiteralParser(repr).parse()) return std::move(*value);
  return PythonValue::of_object(std::string(repr));
}

}  // namespace tracetorch::detail
