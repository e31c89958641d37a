// detail/text/python_literal.hpp: the one reader of Python literals, behind both --call
// (module/python_value.hpp) and set_config_field (config/python_literal.hpp).

#include <doctest/doctest.h>

#include <tracetorch/config_file.hpp>
#include <tracetorch/detail/module/python_value.hpp>
#include <tracetorch/detail/text/python_literal.hpp>

DOCTEST_TEST_SUITE("text python literal") {

DOCTEST_TEST_CASE("one parser: dicts, nesting and Python's escapes; JSON's words only where asked") {
  using tracetorch::detail::PythonLiteralParser;
  using Kind = tracetorch::detail::PythonLiteral::Kind;
  auto dict = PythonLiteralParser("{'rope_type': 'llama3', \"factor\": 8.0, 'layers': (1, [2, None])}").parse();
  DOCTEST_REQUIRE(dict);
  DOCTEST_CHECK(dict->kind == Kind::mapping);
  DOCTEST_REQUIRE(dict->items.size() == 3);
  DOCTEST_CHECK(dict->items[0].first == "rope_type");
  DOCTEST_CHECK(dict->items[0].second.text == "llama3");
  DOCTEST_CHECK(dict->items[1].second.floating == 8.0);
  DOCTEST_CHECK(dict->items[2].second.items[1].second.items[1].second.kind == Kind::none);
  DOCTEST_CHECK(PythonLiteralParser("'tab\\there'").parse()->text == "tab\there");
  DOCTEST_CHECK_FALSE(PythonLiteralParser("true").parse());
  DOCTEST_CHECK(PythonLiteralParser("true", /*json_words=*/true).parse()->boolean);
  PythonLiteralParser unclosed("[1, 2");
  DOCTEST_CHECK_FALSE(unclosed.parse());
  DOCTEST_CHECK(unclosed.why() == "expected ',' or ']' (at character 5)");
  PythonLiteralParser key("{1: 2}");
  DOCTEST_CHECK_FALSE(key.parse());
  DOCTEST_CHECK(key.why().starts_with("a dict key must be a string"));
  std::string deep(100, '[');
  DOCTEST_CHECK_FALSE(PythonLiteralParser(deep + std::string(100, ']')).parse());
}

DOCTEST_TEST_CASE("the same literal read for a call and for a config") {
  const auto json = tracetorch::detail::parse_python_literal_as_json("{'factor': 8.0, 'low': (1, 2), 'on': True}");
  DOCTEST_CHECK(boost::json::serialize(json) == R"({"factor":8E0,"low":[1,2],"on":true})");
  const auto value = tracetorch::detail::parse_python_literal("{'factor': 8.0, 'low': (1, 2), 'on': True}", "--call x");
  DOCTEST_CHECK(value.kind == tracetorch::detail::PythonValue::Kind::mapping);
  DOCTEST_CHECK(value.items[1].second.items[1].second.integer == 2);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::parse_python_literal_as_json("Flase"),
                               "tracetorch: the literal `Flase`: \"Flase\" is not a literal (quote a string: 'text') (at character 0)",
                               tracetorch::Error);
}

}
