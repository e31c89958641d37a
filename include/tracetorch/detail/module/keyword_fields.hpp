#pragma once
/// \file
/// How a keyword struct's fields are visited (tracetorch/keywords.hpp's TRACETORCH_KEYWORDS): a
/// Keyword only when the caller passed it, None as `nullptr`, an optional only when engaged, and a
/// keyword struct held as a field as its own keywords, in its place (Python's `f(x=x, **rest)`).

#include <boost/preprocessor/stringize.hpp>

#include <string_view>

namespace tracetorch {

template <class T>
class Keyword;  // tracetorch/keywords.hpp

namespace detail {

template <class T>
inline constexpr bool is_keyword_v = false;
template <class T>
inline constexpr bool is_keyword_v<Keyword<T>> = true;

/// A type that TRACETORCH_KEYWORDS declares (or that has its own `tracetorch_keywords`).
template <class T>
concept keyword_struct = requires(T& mutable_pack, const T& pack) {
  tracetorch_keywords(pack, [](std::string_view, const auto&) {});
  tracetorch_keywords(mutable_pack, [](std::string_view, auto&) {});
};

/// Calls `visit(name, value)` for a field that counts as passed: a Keyword the caller passed (None
/// as `nullptr`), an engaged optional, or any other field; a keyword struct's own keywords, each
/// by its own name.
template <class Visit, class Field>
void visit_keyword_field(Visit& visit, std::string_view name, const Field& field) {
  if constexpr (keyword_struct<Field>) {
    tracetorch_keywords(field, visit);
  } else if constexpr (is_keyword_v<Field>) {
    if (!field.passed()) return;
    if (field.is_none()) {
      visit(name, nullptr);
    } else {
      visit(name, field.value());
    }
  } else if constexpr (requires { field.has_value(); typename Field::value_type; }) {
    if (field.has_value()) visit(name, *field);
  } else {
    visit(name, field);
  }
}

/// Calls `visit(name, field)` with the field itself, passed or not; a keyword struct's own fields,
/// each by its own name.
template <class Visit, class Field>
void visit_mutable_keyword_field(Visit& visit, std::string_view name, Field& field) {
  if constexpr (keyword_struct<Field>) {
    tracetorch_keywords(field, visit);
  } else {
    visit(name, field);
  }
}

}  // namespace detail
}  // namespace tracetorch

/// One field of TRACETORCH_KEYWORDS, for BOOST_PP_SEQ_FOR_EACH.
#define TRACETORCH_DETAIL_VISIT_KEYWORD(r, value, field)                                     \
  if constexpr (requires { value.field; }) {                                                 \
    ::tracetorch::detail::visit_keyword_field(visit, BOOST_PP_STRINGIZE(field), value.field); \
  }

/// One field of TRACETORCH_KEYWORDS's mutable overload: the field itself, passed or not.
#define TRACETORCH_DETAIL_VISIT_KEYWORD_FIELD(r, value, field)                                  \
  if constexpr (requires { value.field; }) {                                                    \
    ::tracetorch::detail::visit_mutable_keyword_field(visit, BOOST_PP_STRINGIZE(field), value.field); \
  }
