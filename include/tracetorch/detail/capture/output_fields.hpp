#pragma once
/// \file
/// An output struct's fields by name, as TRACETORCH_OUTPUT declares them: how record maps and
/// capture find a field (`"attentions"`, `&Output::attentions`) in a plain C++ struct.

#include <boost/pfr/core.hpp>  // for_each_field, tuple_size_v (all of <boost/pfr.hpp> costs more to parse)
#include <boost/preprocessor/cat.hpp>
#include <boost/preprocessor/punctuation/comma_if.hpp>
#include <boost/preprocessor/seq/for_each.hpp>
#include <boost/preprocessor/seq/for_each_i.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/size.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>

#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/detail/module/holder.hpp"

namespace tracetorch::detail {

/// A field's name as a type: selects the `tracetorch_output_flag` overload TRACETORCH_OUTPUT
/// declares for that field.
template <FixedString Name>
struct FieldTag {};

/// One field of an output struct, by name and member pointer.
template <FixedString Name, auto Member>
struct NamedField {
  static constexpr std::string_view name = Name.view();
  static constexpr auto member = Member;
  using tag = FieldTag<Name>;
};

template <class T>
concept has_output_fields = requires(const T* p) { tracetorch_output_fields(p); };

template <class T>
using output_fields_t = decltype(tracetorch_output_fields(static_cast<const T*>(nullptr)));

template <class T>
inline constexpr bool always_false = false;

/// The name of the field that `Member` points to, from the struct's TRACETORCH_OUTPUT.
template <auto Member>
struct member_name;
template <class Field, class Struct, Field Struct::*Member>
struct member_name<Member> {
  static_assert(has_output_fields<Struct>,
                "tracetorch::record<&Output::field>: declare the output struct's fields with TRACETORCH_OUTPUT(...)");
  template <class F>
  static constexpr std::string_view name_if_same() {
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(F::member)>, Field Struct::*>) {
      return F::member == Member ? F::name : std::string_view();
    } else {
      return {};
    }
  }
  template <class... F>
  static constexpr std::string_view find(std::tuple<F...>*) {
    std::string_view found;
    ((found = found.empty() ? name_if_same<F>() : found), ...);
    return found;
  }
  static constexpr std::string_view value = find(static_cast<output_fields_t<Struct>*>(nullptr));
  static_assert(!value.empty(), "tracetorch::record<&Output::field>: the field is not listed in TRACETORCH_OUTPUT");
};

}  // namespace tracetorch::detail

// TRACETORCH_OUTPUT's pieces (tracetorch/output.hpp): one visit, one NamedField, and one reader
// of the config's `output_<field>` flag, per field. The reader's return type makes a config
// without that member a substitution failure, which capture reads as None (upstream's getattr).
#define TRACETORCH_DETAIL_VISIT_FIELD(r, value, field) visit(BOOST_PP_STRINGIZE(field), value.field);
#define TRACETORCH_DETAIL_CONFIG_FLAG(r, Type, field)                                                      \
  template <class Config>                                                                                 \
  auto tracetorch_output_flag(const Type*, ::tracetorch::detail::FieldTag<BOOST_PP_STRINGIZE(field)>,    \
                              const Config& config) -> decltype(config.BOOST_PP_CAT(output_, field)) {   \
    return config.BOOST_PP_CAT(output_, field);                                                           \
  }
#define TRACETORCH_DETAIL_NAMED_FIELD(r, Type, i, field) \
  BOOST_PP_COMMA_IF(i)::tracetorch::detail::NamedField<BOOST_PP_STRINGIZE(field), &Type::field>
