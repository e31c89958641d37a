#pragma once
/// \file
/// A config struct declared with TRACETORCH_CONFIG (tracetorch/config_file.hpp) read from, and
/// written to, a JSON object field by field: nested config structs, lists and maps of them, and
/// the leaf values of config_value.hpp. Every error names the file and the full key
/// (`vision_config.hidden_size`, `layers[2].size`); keys no field takes are collected.

#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/config_struct.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/detail/config/config_value.hpp"

namespace tracetorch::detail {

/// A struct with TRACETORCH_CONFIG: `tracetorch_config(T&, visit)` found by argument-dependent lookup.
template <class T>
concept is_config_struct = requires(T& config) { tracetorch_config(config, [](std::string_view, auto&) {}); };

template <class T>
struct is_config_map : std::false_type {};
template <class T, class C, class A>
struct is_config_map<std::map<std::string, T, C, A>> : std::true_type {};

/// A value convert_config_value reads whole: a ConfigField holding no config struct.
template <class T>
constexpr bool is_config_leaf() {
  if constexpr (is_std_optional<T>::value || is_std_vector<T>::value) {
    return is_config_leaf<typename T::value_type>();
  } else {
    return ConfigField<T>;
  }
}

template <class T>
constexpr bool is_optional_config() {
  if constexpr (is_std_optional<T>::value) {
    return is_config_struct<typename T::value_type>;
  } else {
    return false;
  }
}

template <class T>
concept is_json_field = std::is_same_v<T, boost::json::value> || std::is_same_v<T, boost::json::object>;

/// Where a read is: the file's name for messages, and the keys of the file no field took.
struct ConfigReadState {
  const std::string& file;
  std::vector<std::string>& unknown_keys;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error("tracetorch: " + file + ": \"" + key + "\" " + what);
  }
};

template <class T>
void read_config_object(const boost::json::object& object, T& config, const std::string& prefix, ConfigReadState& state);

/// Reads one value into `field`, whatever its kind; `key` is the full key for messages.
template <class F>
void read_config_field(const boost::json::value& value, F& field, const std::string& key, ConfigReadState& state) {
  if constexpr (is_config_struct<F>) {
    if (!value.is_object()) state.fail(key, "must be an object");
    read_config_object(value.get_object(), field, key + ".", state);
  } else if constexpr (is_json_field<F>) {
    if constexpr (std::is_same_v<F, boost::json::object>) {
      if (!value.is_object()) state.fail(key, "must be an object");
      field = value.get_object();
    } else {
      field = value;
    }
  } else if constexpr (is_std_optional<F>::value && !is_config_leaf<F>()) {
    if (value.is_null()) {
      field.reset();
    } else {
      typename F::value_type read{};
      read_config_field(value, read, key, state);
      field = std::move(read);
    }
  } else if constexpr (is_std_vector<F>::value && !is_config_leaf<F>()) {
    if (!value.is_array()) state.fail(key, "must be a list");
    F read;
    for (const auto& item : value.get_array()) {
      typename F::value_type element{};
      read_config_field(item, element, key + "[" + std::to_string(read.size()) + "]", state);
      read.push_back(std::move(element));
    }
    field = std::move(read);
  } else if constexpr (is_config_map<F>::value) {
    if (!value.is_object()) state.fail(key, "must be an object");
    F read;
    for (const auto& entry : value.get_object()) {
      typename F::mapped_type element{};
      read_config_field(entry.value(), element, key + "." + std::string(entry.key()), state);
      read.emplace(std::string(entry.key()), std::move(element));
    }
    field = std::move(read);
  } else {
    static_assert(is_config_leaf<F>(), "TRACETORCH_CONFIG: a field must be bool, a number, std::string, a config struct, "
                                  "boost::json::value/object, or a std::optional, std::vector or std::map<std::string, T> of those");
    if (auto why = convert_config_value(value, field)) state.fail(key, *why);
  }
}

/// The field a key of `T`'s config.json names: the key itself, or the field an attribute-map
/// spelling stands for.
template <class T>
std::string_view field_named_by(std::string_view key) noexcept {
  for (const ConfigAlias& alias : config_attribute_map<T>()) {
    if (alias.key == key) return alias.field;
  }
  return key;
}

/// Checks `T`'s attribute map against the names TRACETORCH_CONFIG lists (`known`): each entry's
/// field must be one, and its key must not. A port's mistake, found at its first read.
template <class T>
void check_attribute_map(const std::vector<std::string_view>& known, const ConfigReadState& state) {
  for (const ConfigAlias& alias : config_attribute_map<T>()) {
    const auto listed = [&](std::string_view name) { return std::find(known.begin(), known.end(), name) != known.end(); };
    if (!listed(alias.field) || listed(alias.key)) {
      throw Error("tracetorch: " + state.file + ": TRACETORCH_CONFIG_ATTRIBUTE_MAP maps \"" + std::string(alias.key) +
                  "\" to \"" + std::string(alias.field) + "\", " +
                  (listed(alias.key) ? "but \"" + std::string(alias.key) + "\" is a field of its own"
                                     : "which is not a field TRACETORCH_CONFIG lists"));
    }
  }
}

/// Where `object` holds the field `name`: its own key, or another spelling from `T`'s attribute
/// map (nullptr where neither). Two spellings with different values are an Error naming both.
template <class T>
const boost::json::value* find_config_value(const boost::json::object& object, std::string_view name, std::string& key,
                                            const std::string& prefix, const ConfigReadState& state) {
  const boost::json::value* value = object.if_contains(name);
  key = std::string(name);
  for (const ConfigAlias& alias : config_attribute_map<T>()) {
    if (alias.field != name) continue;
    const boost::json::value* other = object.if_contains(alias.key);
    if (other == nullptr) continue;
    if (value != nullptr && *value != *other) {
      state.fail(prefix + std::string(alias.key), "and \"" + prefix + key + "\" name the same field, with different values (" +
                                                     boost::json::serialize(*other) + " and " + boost::json::serialize(*value) + ")");
    }
    if (value == nullptr) {
      value = other;
      key = std::string(alias.key);
    }
  }
  return value;
}

/// Reads the keys of `object` that `config` declares, under their own names or those of its
/// attribute map; lists the others as unknown, in the file's order (a nested object's unknown
/// keys where that object stands).
template <class T>
void read_config_object(const boost::json::object& object, T& config, const std::string& prefix, ConfigReadState& state) {
  std::vector<std::string_view> known;
  std::vector<std::string> read_from;                    // per known name, the key its value came from
  std::vector<std::vector<std::string>> unknown_inside;  // per known name, what its value left unread
  tracetorch_config(config, [&](std::string_view name, auto& field) {
    known.push_back(name);
    unknown_inside.emplace_back();
    ConfigReadState inner{state.file, unknown_inside.back()};
    std::string key;
    const boost::json::value* value = find_config_value<T>(object, name, key, prefix, state);
    if (value != nullptr) read_config_field(*value, field, prefix + key, inner);
    read_from.push_back(value != nullptr ? key : std::string());
  });
  check_attribute_map<T>(known, state);
  for (const auto& entry : object) {
    const auto found = std::find(known.begin(), known.end(), field_named_by<T>(entry.key()));
    if (found == known.end()) {
      state.unknown_keys.push_back(prefix + std::string(entry.key()));
    } else if (const auto index = static_cast<std::size_t>(found - known.begin()); read_from[index] == entry.key()) {
      const auto& inside = unknown_inside[index];
      state.unknown_keys.insert(state.unknown_keys.end(), inside.begin(), inside.end());
    }
  }
}

/// The JSON form of one field: what a transformers config.json holds for it.
template <class F>
boost::json::value config_field_to_json(const F& field);

template <class T>
boost::json::object config_to_json_object(const T& config) {
  boost::json::object object;
  tracetorch_config(config, [&](std::string_view name, const auto& field) { object[name] = config_field_to_json(field); });
  return object;
}

template <class F>
boost::json::value config_field_to_json(const F& field) {
  if constexpr (is_config_struct<F>) {
    return config_to_json_object(field);
  } else if constexpr (is_json_field<F>) {
    return boost::json::value(field);
  } else if constexpr (std::is_same_v<F, bool> || std::is_same_v<F, std::string>) {
    return boost::json::value(field);
  } else if constexpr (std::is_integral_v<F>) {
    if constexpr (std::is_signed_v<F>) return boost::json::value(static_cast<std::int64_t>(field));
    else return boost::json::value(static_cast<std::uint64_t>(field));
  } else if constexpr (std::is_floating_point_v<F>) {
    return boost::json::value(static_cast<double>(field));
  } else if constexpr (is_std_optional<F>::value) {
    return field ? config_field_to_json(*field) : boost::json::value(nullptr);
  } else if constexpr (is_config_map<F>::value) {
    boost::json::object object;
    for (const auto& [key, value] : field) object[key] = config_field_to_json(value);
    return object;
  } else {
    boost::json::array array;
    for (const auto& item : field) array.push_back(config_field_to_json(static_cast<typename F::value_type>(item)));
    return array;
  }
}

/// Sets the field at dotted `key` ("vision_config.hidden_size", "rope_parameters.factor") from
/// `value`, by the rules of a read; `key` unknown is an Error listing the names at that level.
template <class T>
void set_config_field_at(T& config, std::string_view key, const boost::json::value& value, const std::string& full_key,
                         ConfigReadState& state) {
  const auto dot = key.find('.');
  const std::string_view head = field_named_by<T>(key.substr(0, dot));
  bool found = false;
  std::string names;
  tracetorch_config(config, [&](std::string_view name, auto& field) {
    names += (names.empty() ? "" : ", ") + std::string(name);
    if (found || name != head) return;
    found = true;
    using F = std::remove_cvref_t<decltype(field)>;
    if (dot == std::string_view::npos) {
      read_config_field(value, field, full_key, state);
    } else if constexpr (is_config_struct<F>) {
      set_config_field_at(field, key.substr(dot + 1), value, full_key, state);
    } else if constexpr (is_optional_config<F>()) {
      if (!field) field.emplace();
      set_config_field_at(*field, key.substr(dot + 1), value, full_key, state);
    } else if constexpr (is_config_map<F>::value) {
      typename F::mapped_type element{};
      if (const auto it = field.find(std::string(key.substr(dot + 1))); it != field.end()) element = it->second;
      read_config_field(value, element, full_key, state);
      field[std::string(key.substr(dot + 1))] = std::move(element);
    } else {
      state.fail(full_key, "names no field: \"" + std::string(head) + "\" holds no named fields");
    }
  });
  if (!found) state.fail(full_key, "names no field (known here: " + names + ")");
}

}  // namespace tracetorch::detail
