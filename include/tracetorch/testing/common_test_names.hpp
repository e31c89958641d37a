#pragma once
/// \file
/// The names of the common model tests and the skip-list entry type, in one place for the tests
/// (tracetorch/testing/registration.hpp) and the scanner; no doctest, no LibTorch.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string_view>

namespace tracetorch::testing {

/// Every common test, named as in transformers' test_modeling_common where one exists there.
/// `TRACETORCH_COMMON_MODEL_TESTS(Tester)` registers one doctest case per name, in this order.
inline constexpr std::string_view common_test_names[] = {
    "test_model_output_shapes",
    "test_hidden_states_output",
    "test_attention_outputs",
    "test_cross_attention_outputs",
    "test_model_outputs_equivalence",
    "test_capture_leaves_outputs_unchanged",
    "test_trace_covers_every_submodule",
    "test_debugger_restores_state",
    "test_determinism",
    "test_save_load",
    "test_inputs_embeds_matches_input_ids",
    "test_batching_equivalence",
    "test_non_contiguous_input",
    "test_training",
    "test_model_is_small",
};

/// One entry of a tester's compile-time skip list: which common test, and why the model
/// cannot run it. Write both as string literals: tracetorch-scan-skipped reads them from the
/// source text without compiling it.
struct Skip {
  const char* test;
  const char* reason;
};

/// True when `name` is one of common_test_names.
constexpr bool is_common_test(std::string_view name) {
  return std::find(std::begin(common_test_names), std::end(common_test_names), name) != std::end(common_test_names);
}

namespace detail {

constexpr bool skips_name_common_tests(std::span<const Skip> skips) {
  return std::all_of(skips.begin(), skips.end(), [](const Skip& s) { return s.test != nullptr && is_common_test(s.test); });
}

constexpr bool skips_have_reasons(std::span<const Skip> skips) {
  return std::all_of(skips.begin(), skips.end(),
                     [](const Skip& s) { return s.reason != nullptr && !std::string_view(s.reason).empty(); });
}

constexpr bool skips_are_unique(std::span<const Skip> skips) {
  for (std::size_t i = 0; i < skips.size(); ++i) {
    for (std::size_t j = i + 1; j < skips.size(); ++j) {
      if (std::string_view(skips[i].test) == std::string_view(skips[j].test)) return false;
    }
  }
  return true;
}

}  // namespace detail
}  // namespace tracetorch::testing
