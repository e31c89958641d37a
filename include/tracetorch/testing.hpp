#pragma once
/// \file
/// The common model tests: transformers' test_modeling_common for LibTorch models. A model's
/// test file declares a tester (a small config, the model, its inputs, the sizes to expect and
/// the common tests it skips, with reasons) and instantiates the suite for it:
///
/// \code
/// #include <doctest/doctest.h>
/// #include <tracetorch/testing.hpp>
///
/// struct LlamaModelTester {
///   static constexpr const char* model_name = "LlamaModel";
///   static constexpr tracetorch::testing::Skip skipped_tests[] = {
///       {"test_cross_attention_outputs", "decoder-only: there is no encoder to attend to"}};
///   llama::LlamaConfig config{.vocab_size = 99, .hidden_size = 32, ...};
///   llama::LlamaModel make_model() const { return llama::LlamaModel(config); }
///   tracetorch::testing::Inputs make_inputs() const { return {{"input_ids", torch::randint(99, {2, 7})}}; }
///   tracetorch::testing::ExpectedSizes sizes() const { return {.batch_size = 2, .seq_length = 7, ...}; }
///   auto forward(llama::LlamaModel& model, const tracetorch::testing::Inputs& inputs,
///                const tracetorch::OutputOptions& options) const {
///     return model->forward(inputs.at("input_ids"), options);
///   }
/// };
/// TRACETORCH_COMMON_MODEL_TESTS(LlamaModelTester);   // doctest cases "LlamaModel: test_..."
/// \endcode
///
/// A test that needs something the model lacks (an inputs_embeds path, cross-attention) does
/// not compile for it unless the skip list names it: a skip is always declared, with a reason,
/// never a silent pass. `tracetorch-scan-skipped` reads the skip lists from the source text.
///
/// The tests themselves are in tracetorch/testing/, one file per group: test code over the public
/// API, so they include public headers as a model's own test would. The names and skip lists the
/// scanner also reads are in testing/common_test_names.hpp (no LibTorch).
///
/// Not included by <tracetorch/tracetorch.hpp>: it needs doctest.

#include <doctest/doctest.h>
#include <torch/torch.h>

// What a model's test file uses beside the suite, as before the suite moved into detail/.
#include "tracetorch/capture.hpp"
#include "tracetorch/debugger.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/safetensors.hpp"
#include "tracetorch/testing/common_tests.hpp"  // common_test_names, Skip

#include "tracetorch/testing/registration.hpp"
#include "tracetorch/testing/tester.hpp"  // Inputs, input_or_none, ExpectedSizes, ModelTester

/// Registers the common model tests for `Tester` as doctest cases named "<model_name>: test_x";
/// the tests in `Tester::skipped_tests` are registered skipped, their reason as the description.
/// Use at namespace scope in a test file, after the tester:
///
/// \code
/// TRACETORCH_COMMON_MODEL_TESTS(LlamaModelTester);
/// \endcode
#ifdef DOCTEST_CONFIG_DISABLE
#define TRACETORCH_COMMON_MODEL_TESTS(Tester) static_assert(true)
#else
#define TRACETORCH_COMMON_MODEL_TESTS(Tester)                                                                   \
  static_assert(::tracetorch::testing::detail::assert_valid_tester<Tester>());                                 \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 0) TRACETORCH_DETAIL_COMMON_TEST(Tester, 1)                           \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 2) TRACETORCH_DETAIL_COMMON_TEST(Tester, 3)                           \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 4) TRACETORCH_DETAIL_COMMON_TEST(Tester, 5)                           \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 6) TRACETORCH_DETAIL_COMMON_TEST(Tester, 7)                           \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 8) TRACETORCH_DETAIL_COMMON_TEST(Tester, 9)                           \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 10) TRACETORCH_DETAIL_COMMON_TEST(Tester, 11)                         \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 12) TRACETORCH_DETAIL_COMMON_TEST(Tester, 13)                         \
  TRACETORCH_DETAIL_COMMON_TEST(Tester, 14)                                                                     \
  static_assert(true) /* takes the caller's semicolon */
#endif
