#pragma once
/// \file
/// Keyword arguments for a traceable `forward`: the C++ form of Python's `f(h, attention_mask=m)`.
///
/// A port declares one struct per call convention, its fields in the order upstream passes them,
/// and lists the names once. A call reads like Python, and a trace records exactly the keywords the
/// caller passed, in the call's order (C++ requires designators in declaration order, so the
/// call's order is the declared one):
///
/// \code
/// struct DecoderLayerKeywords {
///   tracetorch::Keyword<torch::Tensor> attention_mask;
///   tracetorch::Keyword<const DynamicCache*> past_key_values;
///   tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);  // not recorded unless passed
/// };
/// TRACETORCH_KEYWORDS(DecoderLayerKeywords, attention_mask, past_key_values, use_cache);
///
/// torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& h, const DecoderLayerKeywords& kw = {});
/// layer(h, {.attention_mask = mask, .past_key_values = nullptr});
/// // kwargs: {"attention_mask": {...tensor...}, "past_key_values": "None"}
/// \endcode
///
/// A misspelled keyword does not compile: the compiler reports that the braced list cannot
/// convert to `const DecoderLayerKeywords&` (compile_fail/keyword_misspelled.cpp).
///
/// How the fields are visited (a Keyword only when passed) is detail/module/keyword_fields.hpp.


#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tracetorch/detail/module/field_list.hpp"      // TRACETORCH_DETAIL_CHECK_FIELD_LIST
#include "tracetorch/detail/module/keyword_fields.hpp"  // visit_keyword_field, TRACETORCH_DETAIL_VISIT_KEYWORD

namespace tracetorch {

/// A default value that does not count as passed: `Keyword<bool> use_cache = defaults_to(false);`.
template <class T>
struct KeywordDefault {
  static constexpr bool is_keyword_default = true;
  T value;
};

/// `defaults_to(v)`: the value a keyword holds when the caller does not pass it.
template <class T>
constexpr KeywordDefault<std::decay_t<T>> defaults_to(T&& value) {
  return {std::forward<T>(value)};
}

/// One keyword argument: a value, whether the caller passed it, and whether it was passed as
/// None (`nullptr` or `std::nullopt`). A trace records it only when passed; None records as `None`.
template <class T>
class Keyword {
  // What `{.name = value}` accepts as a passed value (the other forms have their own constructors).
  template <class U>
  static constexpr bool passable =
      std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, Keyword> &&
      !requires { std::remove_cvref_t<U>::is_keyword_default; } &&
      !std::is_same_v<std::remove_cvref_t<U>, std::nullopt_t> &&
      !requires { typename std::remove_cvref_t<U>::value_type; std::declval<U>().has_value(); } &&
      (!std::is_same_v<std::remove_cvref_t<U>, std::nullptr_t> || std::is_pointer_v<T>);

 public:
  using value_type = T;

  /// Not passed; holds `T{}`.
  Keyword() = default;
  /// Not passed; holds the default.
  template <class U>
    requires std::is_constructible_v<T, U&&>
  Keyword(KeywordDefault<U> fallback) : value_(std::move(fallback.value)), has_value_(true) {}  // NOLINT
  /// Passed: `{.name = value}`.
  template <class U>
    requires passable<U>
  Keyword(U&& value) : value_(std::forward<U>(value)), passed_(true), has_value_(!is_null(value_)) {}  // NOLINT
  /// Passed as None: `{.name = nullptr}`, for any `T` (a tensor holds an undefined tensor).
  Keyword(std::nullptr_t) : passed_(true) {}  // NOLINT: implicit by design
  /// Passed as None: `{.name = std::nullopt}`.
  Keyword(std::nullopt_t) : passed_(true) {}  // NOLINT: implicit by design
  /// Passed; None when the optional is empty.
  template <class U>
    requires std::is_constructible_v<T, const U&>
  Keyword(const std::optional<U>& value)  // NOLINT: implicit by design
      : value_(value ? T(*value) : T{}), passed_(true), has_value_(value.has_value()) {}

  /// Handed on as it came, Python's `**kwargs`: `.x = kw.x` keeps "not passed", None and the
  /// value (and the default, for a keyword not passed), for any `T`; from a `Keyword<U>` whose
  /// value converts to `T` as well.
  template <class U>
    requires(!std::is_same_v<U, T> && std::is_constructible_v<T, const U&>)
  Keyword(const Keyword<U>& other)  // NOLINT: implicit by design
      : value_(other.value()), passed_(other.passed()), has_value_(other.has_value()) {}

  /// Handed on as Python's `f(x=x)` does: always passed, None where there is no value (neither
  /// passed nor defaulted, or passed as None): `.x = kw.x.or_none()`.
  std::optional<T> or_none() const { return has_value_ ? std::optional<T>(value_) : std::nullopt; }

  /// True when the caller passed this keyword (None included).
  bool passed() const noexcept { return passed_; }
  /// True when the caller passed None.
  bool is_none() const noexcept { return passed_ && !has_value_; }
  /// True when there is a value to use: passed and not None, or a default (`defaults_to`); false
  /// for a keyword neither passed nor defaulted, as a Python parameter defaulting to None.
  bool has_value() const noexcept { return has_value_; }

  const T& value() const noexcept { return value_; }
  const T& operator*() const noexcept { return value_; }
  const T* operator->() const noexcept { return &value_; }
  operator const T&() const noexcept { return value_; }  // NOLINT: reads like the value it holds

  /// The value, or `fallback` when there is none (see has_value).
  template <class U>
  T value_or(U&& fallback) const {
    return has_value_ ? value_ : T(std::forward<U>(fallback));
  }

 private:
  static bool is_null(const T& value) noexcept {
    if constexpr (std::is_pointer_v<T>) {
      return value == nullptr;
    } else {
      return false;
    }
  }

  T value_{};
  bool passed_ = false;
  bool has_value_ = false;
};

/// Python's `f(a=a, b=b, ...)`, naming every parameter of a keyword struct: a copy in which each
/// Keyword (those of a keyword struct held as a field too) counts as passed, holding its value
/// (passed or defaulted) or None. `.x = kw.x.or_none()` for every field, in one call:
/// `self_attn({.hidden_states = h, .layer = tracetorch::pass_each(kw)})`.
template <class Keywords>
Keywords pass_each(Keywords keywords) {
  tracetorch_keywords(keywords, [](std::string_view, auto& field) {
    if constexpr (detail::is_keyword_v<std::remove_cvref_t<decltype(field)>>) field = field.or_none();
  });
  return keywords;
}

}  // namespace tracetorch

/// Declares a keyword struct's fields, in declaration order, after the struct (in its namespace):
/// a trace then shows the struct, passed to a forward, as Python keyword arguments.
///
/// It defines two overloads, found by argument-dependent lookup:
/// - `tracetorch_keywords(const Type&, visit)`: `visit(name, value)` for each keyword the caller
///   passed, in order (None as `nullptr`); this is what a trace records.
/// - `tracetorch_keywords(Type&, visit)`: `visit(std::string_view name, Field& field)` for every
///   listed field, in order, passed or not, with the field itself (a `Keyword<T>&`), so that code
///   can set or hand on fields by name:
/// \code
/// DecoderLayerKeywords kw;
/// tracetorch_keywords(kw, [](std::string_view name, auto& field) {
///   if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, tracetorch::Keyword<bool>>) {
///     if (name == "use_cache") field = true;  // now passed, as `use_cache=True`
///   }
/// });
/// \endcode
/// A const object (as a forward receives it) always selects the first overload.
///
/// The list is checked at compile time, one readable error each: a name that is not a member, a
/// field left out, fields out of declaration order ("TRACETORCH_KEYWORDS(S, ...) must list the
/// fields in declaration order": the recorded order would silently differ from the call's).
///
/// With Boost >= 1.84, whose Boost.PFR names fields, `TRACETORCH_KEYWORDS(Type)` alone takes the
/// names from the struct (tests/pfr/test_field_names_from_pfr.cpp; TRACETORCH_FIELD_NAMES_FROM_PFR
/// says which).
#define TRACETORCH_KEYWORDS(Type, ...) \
  TRACETORCH_DETAIL_IF_NAMES_LISTED(TRACETORCH_DETAIL_KEYWORDS_LISTED, TRACETORCH_DETAIL_KEYWORDS_FROM_PFR, Type, __VA_ARGS__)

#define TRACETORCH_DETAIL_KEYWORDS_LISTED(Type, ...)                                                 \
  template <class Visitor>                                                                           \
  void tracetorch_keywords(const Type& object, Visitor&& visit) {                                    \
    const ::tracetorch::detail::dependent_type_t<Type, Visitor>& value = object;                     \
    BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_KEYWORD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  }                                                                                                  \
  template <class Visitor>                                                                           \
  void tracetorch_keywords(Type& object, Visitor&& visit) {                                          \
    ::tracetorch::detail::dependent_type_t<Type, Visitor>& value = object;                           \
    BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_KEYWORD_FIELD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  }                                                                                                  \
  TRACETORCH_DETAIL_CHECK_FIELD_LIST(TRACETORCH_KEYWORDS, Type, __VA_ARGS__)

#define TRACETORCH_DETAIL_KEYWORDS_FROM_PFR(Type, ...)                                                         \
  template <class Visitor>                                                                                     \
  void tracetorch_keywords(const Type& object, Visitor&& visit) {                                              \
    ::tracetorch::detail::for_each_field_named_by_pfr<Type>(                                                   \
        object, [&](::std::string_view name, const auto& field) { ::tracetorch::detail::visit_keyword_field(visit, name, field); }); \
  }                                                                                                            \
  template <class Visitor>                                                                                     \
  void tracetorch_keywords(Type& object, Visitor&& visit) {                                                    \
    ::tracetorch::detail::for_each_field_named_by_pfr<Type>(                                                   \
        object, [&](::std::string_view name, auto& field) { ::tracetorch::detail::visit_mutable_keyword_field(visit, name, field); }); \
  }                                                                                                            \
  TRACETORCH_DETAIL_ASSERT_PFR_NAMES(TRACETORCH_KEYWORDS, Type)
