#pragma once
/// \file
/// A Python value as a trace program or a replay hands it to a forward: a literal of the command
/// line (`--call use_cache=False`), a repr recorded in a trace, or a tensor read from a file.
/// Literals are read by text/python_literal.hpp (what `ast.literal_eval` reads for these); any
/// other repr (`DynamicCache(...)`) stays an object of that repr.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/repr/string_repr.hpp"
#include "tracetorch/detail/text/python_literal.hpp"

namespace tracetorch::detail {

/// A Python value of a call: a literal, a tensor, or an object known by its repr.
struct PythonValue {
  // The literal kinds first, in PythonLiteral::Kind's order (python_value_of converts by number).
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

/// A literal as a value (PythonValue's first kinds are PythonLiteral's).
inline PythonValue python_value_of(PythonLiteral literal) {
  PythonValue out;
  out.kind = static_cast<PythonValue::Kind>(literal.kind);
  out.boolean = literal.boolean;
  out.integer = literal.integer;
  out.floating = literal.floating;
  out.text = std::move(literal.text);
  for (auto& [key, item] : literal.items) out.items.emplace_back(std::move(key), python_value_of(std::move(item)));
  return out;
}

/// `text` as a Python literal, or tracetorch::Error "`what`: 'text' is not a Python literal ...".
inline PythonValue parse_python_literal(std::string_view text, std::string_view what) {
  if (auto value = PythonLiteralParser(text).parse()) return python_value_of(std::move(*value));
  throw Error(std::string(what) + ": '" + std::string(text.substr(0, 200)) +
              "' is not a Python literal (None, True, False, a number, a 'string', a tuple or a list)");
}

/// A repr as a trace records it: the literal it spells, else an object of that repr.
inline PythonValue python_value_from_repr(std::string_view repr) {
  if (auto value = PythonLiteralParser(repr).parse()) return python_value_of(std::move(*value));
  return PythonValue::of_object(std::string(repr));
}

}  // namespace tracetorch::detail
