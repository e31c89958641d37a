#pragma once
// C++ values as transformers' debugger serialises Python values (`_serialize_io`), told to a
// ValueVisitor: tensors, scalars and strings as leaves, sequences (tuples, lists) and mappings
// (string maps, named-field structs, keyword packs) as nested containers. The debugger's
// visitor builds the JSON; this side needs neither Boost.JSON nor the printing code, so a
// model's translation unit compiles only the walk over its own argument types.

#include <torch/torch.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <iterator>  // std::ranges::range, begin and size (<ranges> costs more to parse)
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace tracetorch::detail {

/// Receives one value, depth first. Leaves are the Python values they stand for (a
/// defined tensor, None, bool, int, float, str, a dtype, or an object of an unknown type);
/// a container opens with begin_sequence() or begin_mapping(), announces each value with
/// element() or entry() and closes with end().
class ValueVisitor {
 public:
  virtual void none() = 0;
  virtual void boolean(bool value) = 0;
  virtual void integer(std::int64_t value) = 0;
  virtual void floating(double value) = 0;
  virtual void string(std::string_view value) = 0;
  virtual void dtype(c10::ScalarType value) = 0;
  virtual void tensor(const torch::Tensor& value) = 0;
  /// A value Python serialises as its repr: a type's `tracetorch_repr`, or the default
  /// `<Type object at 0xXXXXXXXX>` (the address sanitised as the debugger does).
  virtual void repr(std::string_view python_repr) = 0;
  virtual void begin_sequence() = 0;
  virtual void begin_mapping() = 0;
  /// The next value is element `index` of the open sequence.
  virtual void element(std::size_t index) = 0;
  /// The next value is entry `key` of the open mapping.
  virtual void entry(std::string_view key) = 0;
  virtual void end() = 0;

 protected:
  ~ValueVisitor() = default;
};


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

/// `std::string tracetorch_repr(const T&)`, found by argument-dependent lookup, gives a type the
/// repr line Python's debugger would record for the object it stands for.
template <class T>
concept has_python_repr = requires(const T& v) {
  { tracetorch_repr(v) } -> std::convertible_to<std::string_view>;
};

/// Raw and smart pointers stand for the object they point to (Python passes references); null is None.
template <class T>
concept is_pointer_like = (std::is_pointer_v<T> && !is_string_like<T>) || requires(const T& p) {
  typename T::element_type;
  p.get();
  *p;
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
  } else if constexpr (is_pointer_like<U>) {
    return value == nullptr;
  } else {
    return false;
  }
}

template <class T>
void visit_value(const T& value, ValueVisitor& visitor);

/// The keywords of a pack as entries of the mapping open in `visitor`.
template <class T>
void visit_keywords(const T& pack, ValueVisitor& visitor) {
  tracetorch_keywords(pack, [&](std::string_view name, const auto& value) {
    visitor.entry(name);
    visit_value(value, visitor);
  });
}

/// The values that hold others (optional, pointer, named fields, keywords, string map, tuple,
/// range), then the fallback: what visit_value passes on once no leaf kind matched.
template <class T>
void visit_composite(const T& value, ValueVisitor& visitor) {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_optional_like<U>) {
    if (value.has_value()) {
      visit_value(*value, visitor);
    } else {
      visitor.none();
    }
  } else if constexpr (is_pointer_like<U>) {
    if (value == nullptr) {
      visitor.none();
    } else {
      visit_value(*value, visitor);
    }
  } else if constexpr (has_named_fields<U>) {
    visitor.begin_mapping();
    tracetorch_fields(value, [&](std::string_view name, const auto& field) {
      if (is_none_like(field)) return;
      visitor.entry(name);
      visit_value(field, visitor);
    });
    visitor.end();
  } else if constexpr (is_keyword_pack<U>) {
    visitor.begin_mapping();
    visit_keywords(value, visitor);
    visitor.end();
  } else if constexpr (is_string_map<U>) {
    visitor.begin_mapping();
    for (const auto& [key, element] : value) {
      visitor.entry(std::string_view(key));
      visit_value(element, visitor);
    }
    visitor.end();
  } else if constexpr (is_tuple_like<U>) {
    visitor.begin_sequence();
    std::apply(
        [&](const auto&... element) {
          std::size_t index = 0;
          ((visitor.element(index++), visit_value(element, visitor)), ...);
        },
        value);
    visitor.end();
  } else if constexpr (std::ranges::range<U>) {
    visitor.begin_sequence();
    std::size_t index = 0;
    for (const auto& element : value) {
      visitor.element(index++);
      visit_value(element, visitor);
    }
    visitor.end();
  } else {
    visitor.repr("<" + c10::demangle(typeid(U).name()) + " object at 0xXXXXXXXX>");
  }
}

/// Walks `value` into `visitor` as Python would see it: the leaf kinds here (tensor, None, a
/// custom repr, bool, int, float, dtype, str, Scalar), the rest in visit_composite.
template <class T>
void visit_value(const T& value, ValueVisitor& visitor) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    if (value.defined()) {
      visitor.tensor(value);
    } else {
      visitor.none();
    }
  } else if constexpr (std::is_same_v<U, std::nullptr_t> || std::is_same_v<U, std::nullopt_t>) {
    visitor.none();  // before strings: nullptr converts to std::string_view
  } else if constexpr (has_python_repr<U>) {
    visitor.repr(std::string_view(tracetorch_repr(value)));
  } else if constexpr (std::is_same_v<U, bool>) {
    visitor.boolean(value);
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U> && !std::is_same_v<U, c10::ScalarType>) {
    visitor.integer(static_cast<std::int64_t>(value));
  } else if constexpr (std::is_floating_point_v<U>) {
    visitor.floating(static_cast<double>(value));
  } else if constexpr (std::is_same_v<U, c10::ScalarType>) {
    visitor.dtype(value);
  } else if constexpr (is_string_like<U>) {
    visitor.string(std::string_view(value));
  } else if constexpr (std::is_same_v<U, c10::Scalar>) {
    if (value.isBoolean()) {
      visitor.boolean(value.toBool());
    } else if (value.isIntegral(false)) {
      visitor.integer(value.toLong());
    } else {
      visitor.floating(value.toDouble());
    }
  } else {
    visit_composite(value, visitor);
  }
}

}  // namespace tracetorch::detail
