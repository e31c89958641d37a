#pragma once
/// \file
/// One value of a transformers config.json converted to a C++ field (ConfigFile::read): the
/// conversion, or why it cannot be made ("must be an integer"), for the caller to name the key.

#include <boost/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracetorch::detail {

template <class T>
struct is_std_optional : std::false_type {};
template <class T>
struct is_std_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

/// The types ConfigFile::read fills: bool, integers, floating point, std::string, and
/// std::optional or std::vector of those.
template <class T>
concept ConfigField =
    std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_floating_point_v<T> || std::is_same_v<T, std::string> ||
    is_std_optional<T>::value || is_std_vector<T>::value;

/// Converts `value` into `field`; on failure leaves `field` as it was and returns what the
/// value must be ("must be an integer", "is 300, out of range"), to follow the key in a message.
template <class T>
std::optional<std::string> convert_config_value(const boost::json::value& value, T& field) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_bool()) return "must be true or false";
    field = value.get_bool();
  } else if constexpr (std::is_integral_v<T>) {
    // JSON integers arrive as int64, or uint64 above int64's range; 2.0 is not an integer here.
    if (value.is_int64()) {
      const std::int64_t read = value.get_int64();
      if (!std::in_range<T>(read)) return "is " + std::to_string(read) + ", out of range";
      field = static_cast<T>(read);
    } else if (value.is_uint64()) {
      const std::uint64_t read = value.get_uint64();
      if (!std::in_range<T>(read)) return "is " + std::to_string(read) + ", too large";
      field = static_cast<T>(read);
    } else {
      return "must be an integer";
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) return "must be a number";
    field = value.to_number<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) return "must be a string";
    field = std::string(value.get_string());
  } else if constexpr (is_std_optional<T>::value) {
    if (value.is_null()) {
      field.reset();
    } else {
      typename T::value_type read{};
      if (auto why = convert_config_value(value, read)) return why;
      field = std::move(read);
    }
  } else {
    if (!value.is_array()) return "must be a list";
    T read;
    for (const auto& item : value.get_array()) {
      typename T::value_type element{};  // not emplace_back's reference: std::vector<bool> has none
      if (auto why = convert_config_value(item, element)) return "[" + std::to_string(read.size()) + "] " + *why;
      read.push_back(std::move(element));
    }
    field = std::move(read);
  }
  return std::nullopt;
}

}  // namespace tracetorch::detail
