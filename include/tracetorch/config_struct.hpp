#pragma once
/// \file
/// `TRACETORCH_CONFIG(Type, field...)` alone: what a model header needs to declare its config
/// struct's fields, without the reading (Boost.JSON, files: <tracetorch/config_file.hpp>, which
/// includes this). A port's io file includes config_file.hpp and reads with load_config.
///
/// \code
/// struct VisionConfig {
///   std::int64_t hidden_size = 768;
///   std::int64_t num_hidden_layers = 12;
/// };
/// TRACETORCH_CONFIG(VisionConfig, hidden_size, num_hidden_layers);
/// \endcode

#include <string_view>
#include <type_traits>

#include "tracetorch/detail/module/field_list.hpp"

/// Declares a config struct's fields, after the struct in its namespace, in the manner of
/// nlohmann's NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT: each JSON key is the field's name.
/// Defines `tracetorch_config(T&, visit)` (`visit(std::string_view name, Field& field)`, const or
/// not, every field in order). Checked at compile time, one readable error each: a name that is
/// not a member, a field left out, fields out of declaration order. With Boost >= 1.84, whose
/// Boost.PFR names fields, `TRACETORCH_CONFIG(Type)` alone takes the names from the struct
/// (TRACETORCH_FIELD_NAMES_FROM_PFR says which); Debian 12 has 1.81, where the names are listed.
#define TRACETORCH_CONFIG(Type, ...) \
  TRACETORCH_DETAIL_IF_NAMES_LISTED(TRACETORCH_DETAIL_CONFIG_LISTED, TRACETORCH_DETAIL_CONFIG_FROM_PFR, Type, __VA_ARGS__)

#define TRACETORCH_DETAIL_CONFIG_FROM_PFR(Type, ...)                                                   \
  template <class Self, class Visitor>                                                                 \
    requires ::std::is_same_v<::std::remove_const_t<Self>, Type>                                       \
  void tracetorch_config(Self& value, Visitor&& visit) {                                               \
    ::tracetorch::detail::for_each_field_named_by_pfr<Type>(value, visit);                             \
  }                                                                                                    \
  TRACETORCH_DETAIL_ASSERT_PFR_NAMES(TRACETORCH_CONFIG, Type)

#define TRACETORCH_DETAIL_CONFIG_LISTED(Type, ...)                                                     \
  template <class Self, class Visitor>                                                                 \
    requires ::std::is_same_v<::std::remove_const_t<Self>, Type>                                       \
  void tracetorch_config(Self& value, Visitor&& visit) {                                               \
    BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_CONFIG_FIELD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  }                                                                                                    \
  TRACETORCH_DETAIL_CHECK_FIELD_LIST(TRACETORCH_CONFIG, Type, __VA_ARGS__)

#define TRACETORCH_DETAIL_VISIT_CONFIG_FIELD(r, value, field)                     \
  if constexpr (requires { value.field; }) {                                      \
    visit(::std::string_view(BOOST_PP_STRINGIZE(field)), value.field);            \
  }
