// JSON text as Python writes it (detail/text/json_text.hpp, python_json.hpp): json.dumps's string
// escaping with ill-formed UTF-8 as errors='replace', and json.dump(indent=2)'s layout, which the
// debugger's trace files use.

#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <random>
#include <string>
#include <string_view>

#include "tracetorch/detail/text/json_text.hpp"
#include "tracetorch/detail/text/python_json.hpp"

namespace {

namespace json = boost::json;

}  // namespace

DOCTEST_TEST_CASE("JSON strings are written as Python's json.dumps writes them, ill-formed UTF-8 as errors='replace'") {
  // Expected texts from Python 3.11: json.dumps(data.decode("utf-8", "replace")). The same
  // writer serves the trace files and the safetensors header (which refuses ill-formed names).
  const auto json_string = [](std::string_view bytes, bool well_formed) {
    std::string out;
    DOCTEST_CHECK_EQ(tracetorch::detail::append_json_string(out, bytes), well_formed);
    return out;
  };
  DOCTEST_CHECK_EQ(json_string("plain", true), R"("plain")");
  DOCTEST_CHECK_EQ(json_string("a\"b\\c\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80/", true),
                   R"("a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00/")");
  DOCTEST_CHECK_EQ(json_string("a\xff" "b", false), R"("a\ufffdb")");
  DOCTEST_CHECK_EQ(json_string("a\xe2\x82z", false), R"("a\ufffdz")");  // one U+FFFD per ill-formed run
  DOCTEST_CHECK_EQ(json_string("\xe2\x82", false), R"("\ufffd")");
  DOCTEST_CHECK_EQ(json_string("\xc0\x80", false), R"("\ufffd\ufffd")");              // overlong NUL
  DOCTEST_CHECK_EQ(json_string("\xed\xa0\x80", false), R"("\ufffd\ufffd\ufffd")");    // encoded surrogate
  DOCTEST_CHECK_EQ(json_string("\xf4\x90\x80\x80", false), R"("\ufffd\ufffd\ufffd\ufffd")");  // above U+10FFFF
  DOCTEST_CHECK_EQ(json_string("\xf8\x88\x80\x80\x80", false), R"("\ufffd\ufffd\ufffd\ufffd\ufffd")");
  DOCTEST_CHECK_EQ(json_string("\xe0\x80", false), R"("\ufffd\ufffd")");
  DOCTEST_CHECK_EQ(json_string("\xf0\x9f\x98", false), R"("\ufffd")");  // truncated at the end

  // json.dumps({"a": [1, 2.5, "\u00e9", None, True, 1e-06], "b": {}, "c": []}, indent=2)
  std::string out;
  tracetorch::detail::append_python_json(out, json::parse(R"({"a": [1, 2.5, "\u00e9", null, true, 1e-06], "b": {}, "c": []})"), 0, false);
  DOCTEST_CHECK_EQ(out, "{\n  \"a\": [\n    1,\n    2.5,\n    \"\\u00e9\",\n    null,\n    true,\n    1e-06\n  ],\n"
                        "  \"b\": {},\n  \"c\": []\n}");
}

// In the debugger's suite, where it was written: the layout of the trace files.
DOCTEST_TEST_SUITE("debugger") {

DOCTEST_TEST_CASE("JSON strings: a character that needs escaping is escaped at every position of a long plain run") {
  // The writer skips plain text eight bytes at a time; each special byte, at each offset of
  // the word it falls in, must still stop it. The text read back equals the text written.
  for (const std::string& special : {std::string("\""), std::string("\\"), std::string("\n"), std::string(1, '\0'), std::string("\x1f"), std::string("\x7f"), std::string("\xc3\xa9")}) {
    for (std::size_t at = 0; at < 24; ++at) {
      std::string text(32, 'x');
      text.replace(at, 1, special);
      std::string out;
      DOCTEST_REQUIRE(tracetorch::detail::append_json_string(out, text));
      DOCTEST_CHECK_EQ(json::value_to<std::string>(json::parse(out)), text);
      for (const char byte : out) DOCTEST_CHECK((byte >= 0x20 && byte < 0x7F));
    }
  }
  std::mt19937 random(7);
  for (int round = 0; round < 2000; ++round) {  // printable ASCII with a few specials mixed in
    std::string text(random() % 64, ' ');
    for (char& byte : text) byte = random() % 16 == 0 ? "\"\\\n\t\x01\x7f"[random() % 6] : static_cast<char>(0x20 + random() % 95);
    std::string out;
    tracetorch::detail::append_json_string(out, text);
    DOCTEST_CHECK_EQ(json::value_to<std::string>(json::parse(out)), text);
  }
}

DOCTEST_TEST_CASE("python json layout: escapes, empty containers, floats") {
  std::string out;
  boost::json::object object;
  object["text"] = "a\"b\\c\nd\te\x01\x7f" "\xc3\xa9\xf0\x9f\x98\x80";
  object["empty_list"] = boost::json::array();
  object["empty_dict"] = boost::json::object();
  object["list"] = boost::json::array{1, 2.5, nullptr, true};
  tracetorch::detail::append_python_json(out, object, 0, false);
  DOCTEST_CHECK(out ==
                "{\n  \"text\": \"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\\u00e9\\ud83d\\ude00\",\n"
                "  \"empty_list\": [],\n  \"empty_dict\": {},\n  \"list\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
}

}  // DOCTEST_TEST_SUITE
