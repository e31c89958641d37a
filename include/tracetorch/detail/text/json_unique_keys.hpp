#pragma once
/// \file
/// JSON parsing that refuses a key seen twice in one object (Boost.JSON keeps the last): the
/// safetensors header and the checkpoint index must not be ambiguous.

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>  // basic_parser is a template: its definitions live here

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tracetorch::detail {

/// Boost.JSON's parser keeps the last of duplicate keys; the header must not have any (two
/// entries for one tensor name are ambiguous). This handler builds the value as
/// boost::json::parser does and stops at the first key seen twice in one object.
class UniqueKeyJsonHandler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  boost::json::value_stack stack;
  std::optional<std::string> duplicate_key;

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_object_begin(boost::json::error_code&) {
    keys_.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t n, boost::json::error_code&) {
    keys_.pop_back();
    stack.push_object(n);
    return true;
  }
  bool on_array_begin(boost::json::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::json::error_code&) {
    stack.push_array(n);
    return true;
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_chars(s);
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::json::error_code& ec) {
    stack.push_key(s);
    key_.append(s.data(), s.size());
    if (!keys_.back().insert(key_).second) {
      duplicate_key = std::move(key_);
      ec = boost::json::error::syntax;  // any error stops the parser; duplicate_key says which
      return false;
    }
    key_.clear();
    return true;
  }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_chars(s);
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    stack.push_string(s);
    return true;
  }
  bool on_number_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_int64(std::int64_t i, boost::json::string_view, boost::json::error_code&) {
    stack.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, boost::json::string_view, boost::json::error_code&) {
    stack.push_uint64(u);
    return true;
  }
  bool on_double(double d, boost::json::string_view, boost::json::error_code&) {
    stack.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::json::error_code&) {
    stack.push_bool(b);
    return true;
  }
  bool on_null(boost::json::error_code&) {
    stack.push_null();
    return true;
  }
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::json::error_code&) { return true; }

 private:
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  std::string key_;                                    // the key being assembled from parts
};

/// Why parse_json_unique_keys gave no value: a key seen twice in one object, or a syntax error.
struct JsonProblem {
  std::optional<std::string> duplicate_key;
  std::string error;  ///< Boost.JSON's message, where the text is not JSON
};

/// `text` as one JSON value, refusing a key seen twice in one object (Boost.JSON would keep the
/// last); nullopt, with `problem` saying why, otherwise. Shared by the safetensors header and
/// the checkpoint index (checkpoint.hpp).
inline std::optional<boost::json::value> parse_json_unique_keys(std::string_view text, JsonProblem& problem) {
  boost::json::basic_parser<UniqueKeyJsonHandler> parser(boost::json::parse_options{});
  parser.handler().stack.reset();
  boost::json::error_code ec;
  const std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (const auto& key = parser.handler().duplicate_key) {
    problem.duplicate_key = *key;
    return std::nullopt;
  }
  if (!ec && used < text.size()) ec = boost::json::error::extra_data;
  if (ec) {
    problem.error = ec.message();
    return std::nullopt;
  }
  return parser.handler().stack.release();
}

}  // namespace tracetorch::detail
