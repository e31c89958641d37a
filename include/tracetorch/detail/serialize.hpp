#pragma once
// C++ values as transformers' debugger serialises Python values (`_serialize_io`): tensors
// through a TensorEncoder, sequences as JSON arrays (file-name suffix `_<i>`), mappings and
// named-field structs as objects (suffix `_<key>`), everything else as its Python repr string.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tracetorch/python_repr.hpp"

namespace tracetorch::detail {

/// Turns one tensor into its JSON record; `prefix` is the file stem transformers would use.
class TensorEncoder {
 public:
  virtual boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix) = 0;

 protected:
  ~TensorEncoder() = default;
};

/// A JSON string value (boost::json::value has no implicit constructor from std::string).
inline boost::json::value json_text(std::string_view text) { return boost::json::string(text); }

template <class T>
concept is_optional_like = requires(const T& v) {
  { v.has_value() } -> std::convertible_to<bool>;
  *v;
  typename T::value_type;
};

template <class T>
concept is_tuple_like = requires { std::tuple_size<T>::value; } && !std::ranges::range<T>;

template <class T>
concept is_string_like = std::is_convertible_v<const T&, std::string_view>;

template <class T>
concept is_string_map = std::ranges::range<T> && requires(const T& m) {
  { m.begin()->first } -> std::convertible_to<std::string_view>;
  m.begin()->second;
};

/// Visits (name, value) pairs; `tracetorch_fields(const T&, FieldVisitor)` found by
/// argument-dependent lookup makes `T` serialise like a transformers ModelOutput.
template <class T>
concept has_named_fields = requires(const T& v) {
  tracetorch_fields(v, [](std::string_view, const auto&) {});
};

/// An options struct passed to a forward travels as Python keyword arguments: it declares
/// `tracetorch_keywords(const T&, Visitor)` and only what it visits is shown.
template <class T>
concept is_keyword_pack = requires(const T& v) {
  tracetorch_keywords(v, [](std::string_view, const auto&) {});
};

/// True when Python would hold None here: ModelOutput leaves such fields out.
template <class T>
bool is_none_like(const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    return !value.defined();
  } else if constexpr (is_optional_like<U>) {
    return !value.has_value();
  } else if constexpr (std::is_same_v<U, std::nullptr_t> || std::is_same_v<U, std::nullopt_t>) {
    return true;
  } else {
    return false;
  }
}

template <class T>
boost::json::value to_trace_json(const T& value, std::string& prefix, TensorEncoder& encoder);

/// Appends `_<suffix>` to the prefix for the duration of one element.
class PrefixScope {
 public:
  PrefixScope(std::string& prefix, std::string_view suffix) : prefix_(prefix), size_(prefix.size()) {
    prefix_ += '_';
    prefix_ += suffix;
  }
  PrefixScope(const PrefixScope&) = delete;
  PrefixScope& operator=(const PrefixScope&) = delete;
  ~PrefixScope() { prefix_.resize(size_); }

 private:
  std::string& prefix_;
  std::size_t size_;
};

template <class T>
void append_keywords(const T& pack, boost::json::object& keywords, std::string& prefix, TensorEncoder& encoder) {
  tracetorch_keywords(pack, [&](std::string_view name, const auto& value) {
    PrefixScope scope(prefix, name);
    keywords[name] = to_trace_json(value, prefix, encoder);
  });
}

template <class T>
boost::json::value to_trace_json(const T& value, std::string& prefix, TensorEncoder& encoder) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    if (!value.defined()) return "None";
    return encoder.encode(value, prefix);
  } else if constexpr (std::is_same_v<U, bool>) {
    return value ? "True" : "False";
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U> && !std::is_same_v<U, c10::ScalarType>) {
    return json_text(std::to_string(static_cast<std::int64_t>(value)));
  } else if constexpr (std::is_floating_point_v<U>) {
    return json_text(python_repr(static_cast<double>(value)));
  } else if constexpr (std::is_same_v<U, c10::ScalarType>) {
    return json_text(python_dtype_repr(value));
  } else if constexpr (is_string_like<U>) {
    return json_text(python_repr(std::string_view(value)));
  } else if constexpr (std::is_same_v<U, std::nullptr_t> || std::is_same_v<U, std::nullopt_t>) {
    return "None";
  } else if constexpr (std::is_same_v<U, c10::Scalar>) {
    if (value.isBoolean()) return value.toBool() ? "True" : "False";
    if (value.isIntegral(false)) return json_text(std::to_string(value.toLong()));
    return json_text(python_repr(value.toDouble()));
  } else if constexpr (is_optional_like<U>) {
    if (!value.has_value()) return "None";
    return to_trace_json(*value, prefix, encoder);
  } else if constexpr (has_named_fields<U>) {
    boost::json::object fields;
    tracetorch_fields(value, [&](std::string_view name, const auto& field) {
      if (is_none_like(field)) return;
      PrefixScope scope(prefix, name);
      fields[name] = to_trace_json(field, prefix, encoder);
    });
    return fields;
  } else if constexpr (is_keyword_pack<U>) {
    boost::json::object keywords;
    append_keywords(value, keywords, prefix, encoder);
    return keywords;
  } else if constexpr (is_string_map<U>) {
    boost::json::object entries;
    for (const auto& [key, element] : value) {
      PrefixScope scope(prefix, std::string_view(key));
      entries[std::string_view(key)] = to_trace_json(element, prefix, encoder);
    }
    return entries;
  } else if constexpr (is_tuple_like<U>) {
    boost::json::array elements;
    std::apply(
        [&](const auto&... element) {
          std::size_t index = 0;
          ((void)[&] {
            PrefixScope scope(prefix, std::to_string(index++));
            elements.push_back(to_trace_json(element, prefix, encoder));
          }(), ...);
        },
        value);
    return elements;
  } else if constexpr (std::ranges::range<U>) {
    boost::json::array elements;
    std::size_t index = 0;
    for (const auto& element : value) {
      PrefixScope scope(prefix, std::to_string(index++));
      elements.push_back(to_trace_json(element, prefix, encoder));
    }
    return elements;
  } else {
    // Python's default repr, with the address already sanitised as the debugger does.
    return json_text("<" + c10::demangle(typeid(U).name()) + " object at 0xXXXXXXXX>");
  }
}

}  // namespace tracetorch::detail
