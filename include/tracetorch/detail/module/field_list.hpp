#pragma once
/// \file
/// Compile-time checks that a macro's list of field names (TRACETORCH_KEYWORDS, TRACETORCH_CONFIG)
/// agrees with the struct: each name a member, every member listed, in declaration order. Each
/// check is one static_assert with one readable line, and the checks never cascade: a name that
/// is not a member is tested in a dependent context, so it fails only its own assertion.
///
/// Where Boost.PFR can name fields itself (Boost >= 1.84, `boost::pfr::get_name`), the macros
/// also take the type alone, `TRACETORCH_CONFIG(Type)`: the names then come from the struct, so
/// there is no list to check. With an older Boost that form is one static_assert.

#include <boost/pfr/core.hpp>
#if __has_include(<boost/pfr/core_name.hpp>)
#include <boost/pfr/core_name.hpp>
#endif
#include <boost/preprocessor/control/iif.hpp>
#include <boost/preprocessor/facilities/check_empty.hpp>
#include <boost/preprocessor/punctuation/comma_if.hpp>
#include <boost/preprocessor/seq/elem.hpp>
#include <boost/preprocessor/seq/for_each.hpp>
#include <boost/preprocessor/seq/for_each_i.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/size.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

/// 1 where Boost.PFR names fields (Boost >= 1.84 in C++20): TRACETORCH_KEYWORDS(Type) and
/// TRACETORCH_CONFIG(Type) may then leave the field names out.
#if defined(BOOST_PFR_CORE_NAME_ENABLED) && BOOST_PFR_CORE_NAME_ENABLED
#define TRACETORCH_FIELD_NAMES_FROM_PFR 1
#else
#define TRACETORCH_FIELD_NAMES_FROM_PFR 0
#endif

namespace tracetorch::detail {

/// `T`, spelled so that the compiler treats it as depending on `D`: member access through it is
/// checked only when a template using it is instantiated.
template <class T, class D>
struct dependent_type {
  using type = T;
};
template <class T, class D>
using dependent_type_t = typename dependent_type<T, D>::type;

/// What field_offset gives for a listed name that is not a member (its own assertion reports it).
inline constexpr std::size_t kNotAMember = std::numeric_limits<std::size_t>::max();

/// True when the offsets of the listed members grow: the list follows declaration order.
constexpr bool in_declaration_order(std::initializer_list<std::size_t> offsets) {
  std::size_t previous = 0;
  bool first = true;
  for (const std::size_t offset : offsets) {
    if (offset == kNotAMember) continue;
    if (!first && offset <= previous) return false;
    previous = offset;
    first = false;
  }
  return true;
}

/// `visit(name, field)` for every field of `value` (a `Type`, const or not), in declaration
/// order, the names from Boost.PFR.
template <class Type, class Self, class Visit>
void for_each_field_named_by_pfr(Self& value, Visit&& visit) {
#if TRACETORCH_FIELD_NAMES_FROM_PFR
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (visit(std::string_view(::boost::pfr::get_name<I, Type>()), ::boost::pfr::get<I>(value)), ...);
  }(std::make_index_sequence<::boost::pfr::tuple_size_v<Type>>{});
#endif  // else the macro's own static_assert has failed: no second error here
}

}  // namespace tracetorch::detail

/// `Listed(Type, names...)` where names follow the type, else `Unlisted(Type)`.
#define TRACETORCH_DETAIL_IF_NAMES_LISTED(Listed, Unlisted, Type, ...) \
  BOOST_PP_IIF(BOOST_PP_CHECK_EMPTY(__VA_ARGS__), Unlisted, Listed)(Type, __VA_ARGS__)

/// The one error of `Macro(Type)` where Boost.PFR cannot name fields.
#define TRACETORCH_DETAIL_ASSERT_PFR_NAMES(Macro, Type)                                    \
  static_assert(TRACETORCH_FIELD_NAMES_FROM_PFR, #Macro "(" #Type ") without field names needs Boost >= 1.84 " \
                "(Boost.PFR names fields); list them: " #Macro "(" #Type ", field, ...)")

/// Whether `Type` has a member `field`, without an error when it has not.
#define TRACETORCH_DETAIL_HAS_MEMBER(Type, field) \
  (::std::is_invocable_v<decltype([](auto& object) -> decltype((void)object.field) {}), Type&>)

/// The offset of member `field` in `Type`, or kNotAMember. offsetof is conditionally supported
/// for types that are not standard-layout; GCC and Clang support it and warn, hence the pragmas.
#define TRACETORCH_DETAIL_FIELD_OFFSET(Type, field)                                           \
  ([]<class U>(::std::type_identity<U>) constexpr -> ::std::size_t {                          \
    if constexpr (requires(U& object) { object.field; }) {                                    \
      _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Winvalid-offsetof\"") \
      return offsetof(U, field);                                                              \
      _Pragma("GCC diagnostic pop")                                                           \
    } else {                                                                                  \
      return ::tracetorch::detail::kNotAMember;                                               \
    }                                                                                         \
  }(::std::type_identity<Type>{}))

#define TRACETORCH_DETAIL_ASSERT_MEMBER(r, data, field)                                                  \
  static_assert(TRACETORCH_DETAIL_HAS_MEMBER(BOOST_PP_SEQ_ELEM(1, data), field),                         \
                BOOST_PP_STRINGIZE(BOOST_PP_SEQ_ELEM(0, data)) "(" BOOST_PP_STRINGIZE(                   \
                    BOOST_PP_SEQ_ELEM(1, data)) ", ...): " BOOST_PP_STRINGIZE(field) " is not a member of the struct");

#define TRACETORCH_DETAIL_OFFSET_ITEM(r, Type, i, field) \
  BOOST_PP_COMMA_IF(i) TRACETORCH_DETAIL_FIELD_OFFSET(Type, field)

/// The three checks of `Macro(Type, field...)`: each name a member, every field listed (Boost.PFR
/// counts them), in declaration order (their offsets grow).
#define TRACETORCH_DETAIL_CHECK_FIELD_LIST(Macro, Type, ...)                                              \
  BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_ASSERT_MEMBER, (Macro)(Type), BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  static_assert(::boost::pfr::tuple_size_v<Type> == BOOST_PP_VARIADIC_SIZE(__VA_ARGS__),                  \
                #Macro "(" #Type ", ...) must list every field of the struct");                           \
  static_assert(::tracetorch::detail::in_declaration_order(                                               \
                    {BOOST_PP_SEQ_FOR_EACH_I(TRACETORCH_DETAIL_OFFSET_ITEM, Type, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))}), \
                #Macro "(" #Type ", ...) must list the fields in declaration order")
