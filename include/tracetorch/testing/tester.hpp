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
#include <utility>

#include "tracetorch/capture.hpp"
#include "tracetorch/detail/testing/common_test_names.hpp"

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

/// Every output the model's output struct can hold.
template <class Out>
OutputOptions all_outputs() {
  OutputOptions options;
  if constexpr (has_hidden_states<Out>) options.output_hidden_states = true;
  if constexpr (has_attentions<Out> || has_cross_attentions<Out>) options.output_attentions = true;
  return options;
}

}  // namespace detail
}  // namespace tracetorch::testing
