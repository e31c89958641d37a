#pragma once
/// \file
/// What the common model tests ask of a tester (its inputs, expected sizes, model and output
/// types, skip list), and the compile-time questions the tests ask of a model's output struct.

#include <torch/torch.h>

#include <concepts>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "tracetorch/capture.hpp"
#include "tracetorch/detail/capture/replacement_builder.hpp"
#include "tracetorch/testing/common_test_names.hpp"

namespace tracetorch::testing {

/// A model's inputs by name, as transformers' `inputs_dict`. Every tensor holds the batch on
/// dimension 0 (the batching test splits them there).
using Inputs = std::map<std::string, torch::Tensor>;

/// `inputs[name]`, or an undefined tensor (Python's None) when there is none.
inline torch::Tensor input_or_none(const Inputs& inputs, const std::string& name) {
  const auto found = inputs.find(name);
  return found == inputs.end() ? torch::Tensor() : found->second;
}

/// What the tests expect of the tester's model and inputs.
struct ExpectedSizes {
  std::int64_t batch_size = 0;
  std::int64_t seq_length = 0;  ///< positions in last_hidden_state (an image: patches, plus [CLS] if any)
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t encoder_seq_length = 0;  ///< key length of cross-attention (test_cross_attention_outputs)
};

/// What TRACETORCH_COMMON_MODEL_TESTS needs of a tester.
template <class T>
concept ModelTester =
    requires(const T& tester) {
      { T::model_name } -> std::convertible_to<const char*>;
      tester.make_model();
      { tester.make_inputs() } -> std::convertible_to<Inputs>;
      { tester.sizes() } -> std::convertible_to<ExpectedSizes>;
    } &&
    requires(const T& tester, std::remove_cvref_t<decltype(std::declval<const T&>().make_model())>& model,
             const Inputs& inputs, const OutputOptions& options) { tester.forward(model, inputs, options); };

namespace detail {

template <class Tester>
using model_t = std::remove_cvref_t<decltype(std::declval<const Tester&>().make_model())>;
template <class Tester>
using output_t = std::remove_cvref_t<decltype(std::declval<const Tester&>().forward(
    std::declval<model_t<Tester>&>(), std::declval<const Inputs&>(), std::declval<const OutputOptions&>()))>;

/// A static_assert that fails only when the template around it is instantiated.
template <class...>
inline constexpr bool missing = false;

template <class Tester>
constexpr std::span<const Skip> skips_of() {
  if constexpr (requires { Tester::skipped_tests; }) {
    return std::span<const Skip>(Tester::skipped_tests);
  } else {
    return {};
  }
}

/// The reason `Tester` skips `test`, or nullptr when it runs it.
template <class Tester>
constexpr const char* skip_reason(std::string_view test) {
  for (const Skip& skip : skips_of<Tester>()) {
    if (std::string_view(skip.test) == test) return skip.reason;
  }
  return nullptr;
}

template <class Out>
concept has_hidden_states = requires(Out& out) { out.hidden_states.has_value(); out.hidden_states->size(); };
template <class Out>
concept has_attentions = requires(Out& out) { out.attentions.has_value(); out.attentions->size(); };
template <class Out>
concept has_cross_attentions = requires(Out& out) { out.cross_attentions.has_value(); out.cross_attentions->size(); };

/// The model class behind a holder (`LlamaModel` -> its traced `LlamaModelImpl`), or the type itself:
/// the class patch mapping builds for it.
template <class T>
using model_class_t = ::tracetorch::detail::built_type_t<T>;

/// Whether the record map `Records` (a tuple of records) declares `key`.
template <class Records>
constexpr bool record_map_declares(std::string_view key) {
  return []<class... Record>(std::string_view name, std::tuple<Record...>*) {
    return ((Record::field == name) || ...);
  }(key, static_cast<Records*>(nullptr));
}

/// `output_<key>=True` for `Field` when the model's record map declares it.
template <class Model, class Field>
void add_declared_flag(std::vector<OutputFlag>& flags) {
  if constexpr (requires { Model::can_record_outputs; }) {
    using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
    if constexpr (::tracetorch::detail::role_of(Field::name) == ::tracetorch::detail::OutputRole::keyed &&
                  record_map_declares<Records>(Field::name)) {
      flags.push_back({OutputKey(Field::member), true});
    }
  }
}

/// Every output the model can return: hidden_states and attentions when its output struct holds
/// them, and every other key its record map declares (`output_router_logits=True`...).
template <class Tester>
OutputOptions all_outputs() {
  using Out = output_t<Tester>;
  using Model = model_class_t<model_t<Tester>>;
  OutputOptions options;
  if constexpr (has_hidden_states<Out>) options.output_hidden_states = true;
  if constexpr (has_attentions<Out> || has_cross_attentions<Out>) options.output_attentions = true;
  if constexpr (::tracetorch::detail::has_output_fields<Out>) {
    [&]<class... Field>(std::tuple<Field...>*) {
      (add_declared_flag<Model, Field>(options.output), ...);
    }(static_cast<::tracetorch::detail::output_fields_t<Out>*>(nullptr));
  }
  return options;
}

}  // namespace detail
}  // namespace tracetorch::testing
