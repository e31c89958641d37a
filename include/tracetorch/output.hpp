#pragma once
/// \file
/// Output structs and what a forward is asked for: `TRACETORCH_OUTPUT` (a transformers
/// ModelOutput in C++), `OutputOptions` (its keyword arguments) and `to_tuple` (return_dict=False).
///
/// \code
/// struct BaseModelOutputWithPast {
///   torch::Tensor last_hidden_state;
///   std::optional<std::vector<torch::Tensor>> hidden_states;
///   std::optional<std::vector<torch::Tensor>> attentions;
/// };
/// TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, hidden_states, attentions);
///
/// auto out = model->forward(ids, {.output_hidden_states = tracetorch::layers{0, 2}, .output_attentions = true});
/// torch::Tensor first = tracetorch::to_tuple(out)[0].toTensor();
/// \endcode

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/module/output_option_names.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/capture/to_tuple.hpp"
#include "tracetorch/kwargs.hpp"

namespace tracetorch {

namespace detail {

/// Visits option `name` of `options` when it is set (output_<key> for the record keys' flags).
template <class Visitor>
void visit_output_option(const OutputOptions& options, std::string_view name, Visitor& visit) {
  const bool found = with_output_option<OutputOptions>(name, [&](std::string_view option, auto member) {
    const auto& value = options.*member;
    if (!value) return;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*value)>, LayerSelection>) {
      if (value->is_list()) {
        visit(option, value->indices());
      } else {
        visit(option, value->all());
      }
    } else {
      visit(option, *value);
    }
  });
  if (!found && name.starts_with("output_")) {
    for (const auto& flag : options.output) {
      if (flag.key.name() == name.substr(7)) visit("output_" + std::string(flag.key.name()), flag.value);
    }
  }
}

/// Sets option `name` from a Kwargs value; false when `name` is not an output option.
inline bool set_output_option(OutputOptions& options, const std::string& name, const KwargValue& value) {
  const auto flag = [&]() -> bool {
    if (const bool* set = value.get_if<bool>()) return *set;
    throw Error("tracetorch::output_options: " + name + " must be True or False");
  };
  const auto text = [&]() -> std::string {
    if (const std::string* set = value.get_if<std::string>()) return *set;
    throw Error("tracetorch::output_options: " + name + " must be a str");
  };
  if (set_output_option_named(options, name, flag, text)) return true;
  if (!name.starts_with("output_")) return false;
  options.output.push_back({OutputKey::named(std::string_view(name).substr(7)), flag()});
  return true;
}

}  // namespace detail

/// In a trace, options appear as Python keyword arguments holding only what was set, so a call
/// without options traces exactly like `model(input_ids)` in Python: first those named in
/// `call_order` (the caller's order, from output_options(kwargs)), then the others set, in
/// declaration order.
template <class Visitor>
void tracetorch_keywords(const OutputOptions& options, Visitor&& visit) {
  const auto in_call_order = [&](std::string_view name) {
    return std::find(options.call_order.begin(), options.call_order.end(), name) != options.call_order.end();
  };
  for (const auto& name : options.call_order) detail::visit_output_option(options, name, visit);
  std::vector<std::string> flags;
  for (const auto& flag : options.output) flags.push_back("output_" + std::string(flag.key.name()));
  for (const auto& name : detail::output_option_names<OutputOptions>(flags)) {
    if (!in_call_order(name)) detail::visit_output_option(options, name, visit);
  }
}

/// OutputOptions from Python-style keyword arguments, recorded in their order (call_order):
/// `model(x, tracetorch::output_options({{"output_attentions", true}, {"output_hidden_states", true}}))`
/// is Python's `model(x, output_attentions=True, output_hidden_states=True)`, traced in that
/// order. Each entry is output_hidden_states, output_attentions, use_cache, return_dict,
/// debug_io, prune_layers (True/False), debug_io_dir (a str) or output_<key> (a record key's
/// flag); another name or type is an Error naming it.
inline OutputOptions output_options(const Kwargs& kwargs) {
  OutputOptions options;
  for (const auto& [name, value] : kwargs.entries()) {
    if (!detail::set_output_option(options, name, value)) {
      throw Error("tracetorch::output_options: " + name + " is not an output option; hand it on in a tracetorch::Kwargs");
    }
    options.call_order.push_back(name);
  }
  return options;
}

/// What a callee's `**kwargs` holds of a call's options, as transformers 5 hands them on once
/// `@capture_outputs` has read them (with kwargs.get, not pop): the `output_*` flags, and
/// use_cache where the caller's own signature does not take it (`with_use_cache`), in the
/// caller's order. A list of hidden-state positions (`output_hidden_states=[0, 2]`) has no Kwargs
/// form: a tracetorch::Error naming it.
/// `layer(h, keywords, tracetorch::options_as_kwargs(options, /*with_use_cache=*/false))`
inline Kwargs options_as_kwargs(const OutputOptions& options, bool with_use_cache) {
  Kwargs kwargs;
  tracetorch_keywords(options, [&](std::string_view name, const auto& value) {
    if (!name.starts_with("output_") && !(with_use_cache && name == "use_cache")) return;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>) {
      kwargs.add(std::string(name), value);
    } else {
      throw Error("tracetorch::options_as_kwargs: " + std::string(name) + " is handed on as **kwargs and must be True or False");
    }
  });
  return kwargs;
}

/// output_hidden_states / output_attentions / return_dict, and `output_<key>` for the record
/// map's other keys, from the call's options, else the model's `config` (a bool or
/// std::optional<bool> member of that name), else false (return_dict: true). The other keys'
/// config flags are read through the output struct `Out`: by default the return type of the
/// model's forward; name it where the forward is overloaded.
/// \code
/// const bool as_tuple = !tracetorch::resolve_output_options(*this, options).return_dict;
/// const bool router = tracetorch::resolve_output_options<MoeModelOutput>(*this, options).wants("router_logits");
/// \endcode
template <class Out = detail::deduce_output, class Model>
ResolvedOutputs resolve_output_options(const Model& model, const OutputOptions& options) {
  using Output = detail::model_output_t<Out, Model>;
  detail::check_output_keys(options);
  return detail::resolve_output_options<Output>(model, options);
}

/// The tuple form of an output struct, in field order (through Boost.PFR).
/// \code
/// torch::Tensor last_hidden_state = tracetorch::to_tuple(out)[0].toTensor();
/// \endcode
template <class Out>
OutputTuple to_tuple(const Out& out) {
  return detail::to_tuple_in_field_order(out);
}

/// The tuple `model` would return with return_dict=False, as upstream orders a ModelOutput: the
/// fields the forward set itself first, in declaration order, then the captured ones in the order
/// capture set them (to_tuple(out) keeps declaration order). None fields are left out.
/// \code
/// if (!tracetorch::resolve_output_options(*model, options).return_dict) return tracetorch::to_tuple(out, *model);
/// \endcode
template <class Out, class Model>
OutputTuple to_tuple(const Out& out, const Model&) {
  return detail::to_tuple_in_capture_order<Model>(out);
}

/// Field `i` of an OutputTuple that holds an object of type `T` (a field IValue cannot hold, such
/// as `std::shared_ptr<DynamicCache>`); a tracetorch::Error if it holds something else.
/// \code
/// auto cache = tracetorch::tuple_object<std::shared_ptr<DynamicCache>>(tracetorch::to_tuple(out), 1);
/// \endcode
template <class T>
const T& tuple_object(const OutputTuple& tuple, std::size_t i) {
  return detail::tuple_object<T>(tuple, i);
}

}  // namespace tracetorch

/// Declares an output struct's fields, in declaration order, after the struct (in its
/// namespace): the C++ form of a transformers ModelOutput dataclass. Traces show the struct as
/// an object keyed by field name with None fields left out; capture_outputs finds fields by name
/// and reads a record key's `output_<field>` flag from the model's config.
#define TRACETORCH_OUTPUT(Type, ...)                                                                            \
  template <class Visitor>                                                                                      \
  void tracetorch_fields(const Type& value, Visitor&& visit) {                                                  \
    BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_FIELD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))          \
  }                                                                                                             \
  constexpr auto tracetorch_output_fields(const Type*) {                                                        \
    static_assert(::boost::pfr::tuple_size_v<Type> == BOOST_PP_VARIADIC_SIZE(__VA_ARGS__),                     \
                  "TRACETORCH_OUTPUT(" #Type ", ...) must list every field of the struct");                     \
    return std::tuple<BOOST_PP_SEQ_FOR_EACH_I(TRACETORCH_DETAIL_NAMED_FIELD, Type,                              \
                                              BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))>{};                        \
  }                                                                                                             \
  BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_CONFIG_FLAG, Type, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))              \
  static_assert(true)
