#pragma once
/// \file
/// OutputOptions' keywords by name, in one table read everywhere a name meets its member:
/// output_options(kwargs) and a trace's record of the options (output.hpp), a trace program's
/// `--call` and replay (module/keyword_assign.hpp). A template over the options type:
/// capture/output_options.hpp includes the module headers that include the program's.

#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tracetorch::detail {

/// One option: its keyword name and its member.
template <class Member>
struct NamedOption {
  std::string_view name;
  Member member;
};

/// OutputOptions' keywords besides the record keys' `output_<key>` flags, in declaration order
/// (the record keys' flags come after output_attentions). Each member is an optional of bool,
/// of a str (`debug_io_dir`) or of a LayerSelection (`output_hidden_states`, which a bool sets).
template <class Options>
constexpr auto output_option_table() {
  return std::tuple{NamedOption{"output_hidden_states", &Options::output_hidden_states},
                    NamedOption{"output_attentions", &Options::output_attentions},
                    NamedOption{"use_cache", &Options::use_cache},
                    NamedOption{"return_dict", &Options::return_dict},
                    NamedOption{"debug_io", &Options::debug_io},
                    NamedOption{"debug_io_dir", &Options::debug_io_dir},
                    NamedOption{"prune_layers", &Options::prune_layers}};
}

/// `visit(name, member)` for each option of the table, in order.
template <class Options, class Visit>
void for_each_output_option(Visit&& visit) {
  std::apply([&](const auto&... option) { (visit(option.name, option.member), ...); }, output_option_table<Options>());
}

/// Calls `act(name, member)` for the option named `name`; false where the table has none.
template <class Options, class Act>
bool with_output_option(std::string_view name, Act&& act) {
  bool found = false;
  for_each_output_option<Options>([&](std::string_view option, auto member) {
    if (found || option != name) return;
    found = true;
    act(option, member);
  });
  return found;
}

/// Every option's name in declaration order, with `record_key_flags` (`output_<key>`, the
/// options' `output` member) in their place after output_attentions.
template <class Options>
std::vector<std::string> output_option_names(const std::vector<std::string>& record_key_flags) {
  std::vector<std::string> names;
  for_each_output_option<Options>([&](std::string_view name, auto) {
    names.emplace_back(name);
    if (name == "output_attentions") names.insert(names.end(), record_key_flags.begin(), record_key_flags.end());
  });
  return names;
}

/// Sets option `name` of `options` (a tracetorch::OutputOptions) from `as_bool()` or
/// `as_string()`, which throw for a value of another type; false where `name` is not in the table.
template <class Options, class AsBool, class AsString>
bool set_output_option_named(Options& options, std::string_view name, AsBool&& as_bool, AsString&& as_string) {
  return with_output_option<Options>(name, [&](std::string_view, auto member) {
    using Value = typename std::remove_cvref_t<decltype(options.*member)>::value_type;
    if constexpr (std::is_same_v<Value, bool>) {
      options.*member = as_bool();
    } else if constexpr (std::is_same_v<Value, std::string>) {
      options.*member = as_string();
    } else {
      options.*member = Value(as_bool());  // a LayerSelection: all of them, or none
    }
  });
}

}  // namespace tracetorch::detail
