#pragma once
/// \file
/// The registered name of a shared part's class in one family: the family's prefix and the part's
/// suffix joined at compile time ("Qwen3" + "Attention"), the name a trace shows.

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "tracetorch/detail/module/traced.hpp"  // FixedString

namespace tracetorch::detail {

template <class Family, FixedString Suffix>
constexpr auto family_class_name() {
  constexpr std::string_view prefix = Family::name;
  constexpr std::string_view suffix = Suffix.view();
  char text[prefix.size() + suffix.size() + 1]{};
  std::copy_n(prefix.data(), prefix.size(), text);
  std::copy_n(suffix.data(), suffix.size(), text + prefix.size());
  return FixedString<prefix.size() + suffix.size() + 1>(text);
}

}  // namespace tracetorch::detail
