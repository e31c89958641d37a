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

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/field_list.hpp"

#include <boost/preprocessor/tuple/eat.hpp>

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

/// Declares a config struct that extends another config struct, as transformers' modular configs
/// derive one model's config from another's (`class MistralConfig(LlamaConfig)`): its keys are the
/// base's, read and written through the base's TRACETORCH_CONFIG, then the fields listed here, the
/// derived struct's own, each name written once:
/// \code
/// struct MistralConfig : llama::LlamaConfig {
///   std::optional<std::int64_t> sliding_window = 4096;
/// };
/// TRACETORCH_CONFIG_EXTENDS(MistralConfig, llama::LlamaConfig, sliding_window);
/// \endcode
/// Checked at compile time: `Base` is a public base declared with TRACETORCH_CONFIG (or EXTENDS),
/// each listed name is a member of the derived struct and not of the base, in declaration order.
/// A derived member left out of the list is not a config key (a process's rank, say), since
/// Boost.PFR cannot count the fields of a derived struct. The base's attribute map applies, and
/// the derived struct's own `validate` hook, where it has one, replaces the base's.
#define TRACETORCH_CONFIG_EXTENDS(Type, Base, ...)                                                    \
  template <class Self, class Visitor>                                                                 \
    requires ::std::is_same_v<::std::remove_const_t<Self>, Type>                                       \
  void tracetorch_config(Self& value, Visitor&& visit) {                                               \
    tracetorch_config(static_cast<::std::conditional_t<::std::is_const_v<Self>, const Base, Base>&>(value), visit); \
    BOOST_PP_IIF(BOOST_PP_CHECK_EMPTY(__VA_ARGS__), BOOST_PP_TUPLE_EAT(1), TRACETORCH_DETAIL_VISIT_OWN_FIELDS)(value, __VA_ARGS__) \
  }                                                                                                    \
  static_assert(::std::is_base_of_v<Base, Type> && ::std::is_convertible_v<Type*, Base*>,              \
                "TRACETORCH_CONFIG_EXTENDS(" #Type ", " #Base ", ...): " #Base " is not a public base of " #Type); \
  static_assert([]<class U>(::std::type_identity<U>) {                                                 \
                  return requires(U& base) { tracetorch_config(base, [](::std::string_view, auto&) {}); }; \
                }(::std::type_identity<Base>{}),                                                       \
                "TRACETORCH_CONFIG_EXTENDS(" #Type ", " #Base ", ...): " #Base " is not declared with TRACETORCH_CONFIG"); \
  BOOST_PP_IIF(BOOST_PP_CHECK_EMPTY(__VA_ARGS__), BOOST_PP_TUPLE_EAT(3), TRACETORCH_DETAIL_CHECK_OWN_FIELDS)(Type, Base, __VA_ARGS__)

#define TRACETORCH_DETAIL_VISIT_OWN_FIELDS(value, ...) \
  BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_CONFIG_FIELD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))

#define TRACETORCH_DETAIL_ASSERT_NOT_IN_BASE(r, data, field)                                                   \
  static_assert(!TRACETORCH_DETAIL_HAS_MEMBER(BOOST_PP_SEQ_ELEM(1, data), field),                              \
                "TRACETORCH_CONFIG_EXTENDS(" BOOST_PP_STRINGIZE(BOOST_PP_SEQ_ELEM(0, data)) ", " BOOST_PP_STRINGIZE( \
                    BOOST_PP_SEQ_ELEM(1, data)) ", ...): " BOOST_PP_STRINGIZE(field) " is a key of the base already");

#define TRACETORCH_DETAIL_CHECK_OWN_FIELDS(Type, Base, ...)                                                   \
  BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_ASSERT_MEMBER, (TRACETORCH_CONFIG_EXTENDS)(Type), BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_ASSERT_NOT_IN_BASE, (Type)(Base), BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__)) \
  static_assert(::tracetorch::detail::in_declaration_order(                                                   \
                    {BOOST_PP_SEQ_FOR_EACH_I(TRACETORCH_DETAIL_OWN_OFFSET_ITEM, (Type)(Base), BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))}), \
                "TRACETORCH_CONFIG_EXTENDS(" #Type ", ...) must list the fields in declaration order")

/// A listed field's offset, left out of the order check where it is the base's (its own error says so).
#define TRACETORCH_DETAIL_OWN_OFFSET_ITEM(r, data, i, field)                                     \
  BOOST_PP_COMMA_IF(i)(TRACETORCH_DETAIL_HAS_MEMBER(BOOST_PP_SEQ_ELEM(1, data), field)          \
                           ? ::tracetorch::detail::kNotAMember                                   \
                           : TRACETORCH_DETAIL_FIELD_OFFSET(BOOST_PP_SEQ_ELEM(0, data), field))

/// Other spellings a config.json may use for fields, as transformers' `attribute_map` (GPT-2's
/// `hidden_size` for `n_embd`), after TRACETORCH_CONFIG in the struct's namespace:
/// \code
/// TRACETORCH_CONFIG_ATTRIBUTE_MAP(GPT2Config, {{"hidden_size", "n_embd"}, {"num_hidden_layers", "n_layer"}});
/// \endcode
/// A read takes a field's value from whichever spelling the file has (errors name that key) and
/// refuses a file that gives both with different values; set_config_field takes both too. A map
/// entry whose field TRACETORCH_CONFIG does not list, or whose key is a field's own name, is an
/// Error at the first read.
#define TRACETORCH_CONFIG_ATTRIBUTE_MAP(Type, ...)                                                     \
  [[maybe_unused]] constexpr auto tracetorch_config_attribute_map(const Type*) {                       \
    return ::std::to_array<::tracetorch::ConfigAlias>(__VA_ARGS__);                                    \
  }                                                                                                    \
  static_assert(true, "a semicolon follows TRACETORCH_CONFIG_ATTRIBUTE_MAP")

namespace tracetorch {

struct ConfigReport;  // what a read found besides the fields: <tracetorch/config_file.hpp>

/// One entry of TRACETORCH_CONFIG_ATTRIBUTE_MAP: `key`, another spelling of `field`.
struct ConfigAlias {
  std::string_view key;
  std::string_view field;
};

namespace detail {

/// The name TRACETORCH_CONFIG lists for `field`, a member of `config` found by its address and
/// type (a nested struct shares its address with its own first member).
template <class Config, class Field>
std::string_view config_key_of(const Config& config, const Field& field) {
  std::string_view key;
  tracetorch_config(config, [&](std::string_view name, const auto& member) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(member)>, Field>) {
      if (&member == &field) key = name;
    }
  });
  if (key.empty()) throw Error("tracetorch::check_positive/check_not_negative: an argument is not a field that TRACETORCH_CONFIG lists");
  return key;
}

/// The entries of `Config`'s TRACETORCH_CONFIG_ATTRIBUTE_MAP, none where it has no map.
template <class Config>
constexpr auto config_attribute_map() noexcept {
  if constexpr (requires { tracetorch_config_attribute_map(static_cast<const Config*>(nullptr)); }) {
    return tracetorch_config_attribute_map(static_cast<const Config*>(nullptr));
  } else {
    return std::array<ConfigAlias, 0>{};
  }
}

/// The value of a field, or nullopt for an optional field that is not set.
template <class Field>
auto value_if_set(const Field& field) {
  if constexpr (requires { field.has_value(); }) {
    return field;
  } else {
    return std::optional<Field>(field);
  }
}

}  // namespace detail

/// For a config's validate hook: each of `fields`, members of `config` named once (the key
/// comes from TRACETORCH_CONFIG's list), must be positive. An integer that is not throws
/// tracetorch::Error "<where>: <key> is <value>: sizes must be positive"; a floating-point value
/// that is not finite and > 0, "<where>: <key> must be a finite number > 0". An optional field
/// that is not set passes.
/// \code
/// void LlamaConfig::validate(const std::string& where) const {
///   tracetorch::check_positive(*this, "llama: " + where, vocab_size, hidden_size, rms_norm_eps);
/// }
/// \endcode
template <class Config, class... Fields>
void check_positive(const Config& config, const std::string& where, const Fields&... fields) {
  const auto check = [&](const auto& field) {
    const std::string key(detail::config_key_of(config, field));  // first: a wrong argument fails every time
    const auto value = detail::value_if_set(field);
    if (!value) return;
    if constexpr (std::is_floating_point_v<std::remove_cvref_t<decltype(*value)>>) {
      if (!(*value > 0) || !std::isfinite(*value)) throw Error(where + ": " + key + " must be a finite number > 0");
    } else if (!(*value > 0)) {
      throw Error(where + ": " + key + " is " + std::to_string(*value) + ": sizes must be positive");
    }
  };
  (check(fields), ...);
}

/// check_positive's companion for counts that may be zero (num_hidden_layers): "<where>: <key>
/// is <value>: it must be >= 0".
template <class Config, class... Fields>
void check_not_negative(const Config& config, const std::string& where, const Fields&... fields) {
  const auto check = [&](const auto& field) {
    const std::string key(detail::config_key_of(config, field));
    const auto value = detail::value_if_set(field);
    if (value && *value < 0) throw Error(where + ": " + key + " is " + std::to_string(*value) + ": it must be >= 0");
  };
  (check(fields), ...);
}

}  // namespace tracetorch
