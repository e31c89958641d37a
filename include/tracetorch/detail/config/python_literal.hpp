#pragma once
/// \file
/// A Python literal as a command line gives it (`True`, `None`, `1e-6`, `'gelu'`, `[1, 2]`,
/// `(1, 2)`, `{'factor': 8.0}`) or JSON text, parsed into a boost::json::value: what
/// set_config_field (tracetorch/config_file.hpp) converts like a config.json value.

#include <boost/json.hpp>

#include <string>
#include <string_view>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/text/python_literal.hpp"

namespace tracetorch::detail {

/// A literal as the JSON value config.json would hold for it (a tuple as a list, a dict as an object).
inline boost::json::value python_literal_to_json(const PythonLiteral& literal) {
  using Kind = PythonLiteral::Kind;
  switch (literal.kind) {
    case Kind::none: return nullptr;
    case Kind::boolean: return literal.boolean;
    case Kind::integer: return literal.integer;
    case Kind::floating: return literal.floating;
    case Kind::string: return boost::json::string(literal.text);
    case Kind::sequence: {
      boost::json::array items;
      for (const auto& [key, item] : literal.items) items.push_back(python_literal_to_json(item));
      return items;
    }
    case Kind::mapping: {
      boost::json::object object;
      for (const auto& [key, item] : literal.items) object[key] = python_literal_to_json(item);
      return object;
    }
  }
  return nullptr;
}

/// `text`, a Python literal or JSON, as a JSON value; throws Error naming the literal when it is not one.
inline boost::json::value parse_python_literal_as_json(std::string_view text) {
  PythonLiteralParser parser(text, /*json_words=*/true);
  const auto literal = parser.parse();
  if (!literal) throw Error("tracetorch: the literal `" + std::string(text) + "`: " + parser.why());
  return python_literal_to_json(*literal);
}

}  // namespace tracetorch::detail
