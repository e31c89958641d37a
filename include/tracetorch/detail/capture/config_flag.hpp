#pragma once
/// \file
/// The one reader of a model's `config.<flag>`, a bool or a std::optional<bool> (None): capture
/// reads output_hidden_states, output_attentions, return_dict and use_cache through it.

#include <optional>

#include "tracetorch/detail/module/serialize.hpp"

namespace tracetorch::detail {

/// A flag as a bool, or None when it is an empty optional.
template <class T>
std::optional<bool> flag_value(const T& value) {
  if constexpr (is_optional_like<T>) {
    return value.has_value() ? std::optional<bool>(static_cast<bool>(*value)) : std::nullopt;
  } else {
    return static_cast<bool>(value);
  }
}

/// The flag `member` reads from `model.config`; None when the model has no config or the config
/// lacks that member (transformers reads an absent attribute as None).
template <class Model, class Member>
std::optional<bool> config_flag(const Model& model, Member member) {
  if constexpr (requires { member(model.config); }) {
    return flag_value(member(model.config));
  } else {
    return std::nullopt;
  }
}

// The config members capture reads, each a reader for config_flag; its return type makes a
// config without the member a substitution failure, which config_flag reads as None.
#define TRACETORCH_DETAIL_CONFIG_MEMBER(name) \
  inline constexpr auto name##_member = [](const auto& config) -> decltype(config.name) { return config.name; }
TRACETORCH_DETAIL_CONFIG_MEMBER(output_hidden_states);
TRACETORCH_DETAIL_CONFIG_MEMBER(output_attentions);
TRACETORCH_DETAIL_CONFIG_MEMBER(return_dict);
TRACETORCH_DETAIL_CONFIG_MEMBER(use_cache);
#undef TRACETORCH_DETAIL_CONFIG_MEMBER

}  // namespace tracetorch::detail
