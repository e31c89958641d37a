#pragma once
/// \file
/// OutputOptions' keywords by name, set in one place for output_options(kwargs) (output.hpp)
/// and for a trace program's `--call` and replay (module/keyword_assign.hpp). A template over
/// the options type: capture/output_options.hpp includes the module headers that include the
/// program's.

#include <string_view>

namespace tracetorch::detail {

/// OutputOptions' keyword names besides the record keys' `output_<key>` flags, in declaration order.
inline constexpr std::string_view kOutputOptionNames[] = {"output_hidden_states", "output_attentions", "use_cache",
                                                          "return_dict",          "debug_io",          "debug_io_dir",
                                                          "prune_layers"};

/// Sets option `name` of `options` (a tracetorch::OutputOptions) from `as_bool()` or
/// `as_string()`, which throw for a value of another type; false where `name` is none of
/// kOutputOptionNames.
template <class Options, class AsBool, class AsString>
bool set_output_option_named(Options& options, std::string_view name, AsBool&& as_bool, AsString&& as_string) {
  if (name == "output_hidden_states") {
    options.output_hidden_states = as_bool();  // all of them, or none
  } else if (name == "output_attentions") {
    options.output_attentions = as_bool();
  } else if (name == "use_cache") {
    options.use_cache = as_bool();
  } else if (name == "return_dict") {
    options.return_dict = as_bool();
  } else if (name == "debug_io") {
    options.debug_io = as_bool();
  } else if (name == "debug_io_dir") {
    options.debug_io_dir = as_string();
  } else if (name == "prune_layers") {
    options.prune_layers = as_bool();
  } else {
    return false;
  }
  return true;
}

}  // namespace tracetorch::detail
