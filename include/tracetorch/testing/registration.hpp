#pragma once
/// \file
/// How TRACETORCH_COMMON_MODEL_TESTS turns a tester into doctest cases, through doctest's public
/// macros and decorators only: the list of common tests, each case's name, skip and body.

#include <doctest/doctest.h>

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>

#include "tracetorch/testing/common_test_names.hpp"
#include "tracetorch/testing/consistency_tests.hpp"
#include "tracetorch/testing/output_tests.hpp"
#include "tracetorch/testing/tester.hpp"
#include "tracetorch/testing/tracing_tests.hpp"
#include "tracetorch/testing/training_tests.hpp"

namespace tracetorch::testing::detail {

// Each common test is a struct with its name and a member template `run`
// (TRACETORCH_DETAIL_DEFINE_COMMON_TEST): a member template is compiled only for the testers that
// run it, so a model may lack what a test it skips would need (an inputs_embeds path,
// cross-attention).

/// In the order of common_test_names (checked below); TRACETORCH_COMMON_MODEL_TESTS names each
/// by its index.
using all_common_tests =
    std::tuple<test_model_output_shapes, test_hidden_states_output, test_attention_outputs, test_cross_attention_outputs,
               test_model_outputs_equivalence, test_capture_leaves_outputs_unchanged, test_trace_covers_every_submodule,
               test_debugger_restores_state, test_determinism, test_save_load, test_inputs_embeds_matches_input_ids,
               test_batching_equivalence, test_non_contiguous_input, test_training, test_model_is_small>;

template <std::size_t index>
using common_test_t = std::tuple_element_t<index, all_common_tests>;

template <class... Tests>
constexpr bool names_match(std::tuple<Tests...>*) {
  constexpr std::string_view names[] = {Tests::name...};
  if (sizeof...(Tests) != std::size(common_test_names)) return false;
  for (std::size_t i = 0; i < sizeof...(Tests); ++i) {
    if (names[i] != common_test_names[i]) return false;
  }
  return true;
}
static_assert(names_match(static_cast<all_common_tests*>(nullptr)),
              "tracetorch::testing: common_test_names and the test structs disagree");
static_assert(std::tuple_size_v<all_common_tests> == 15,
              "tracetorch::testing: TRACETORCH_COMMON_MODEL_TESTS registers indices 0 to 14: update it");

/// Whether `Tester` can run the suite at all; when not, assert_valid_tester has said why, and
/// no test body is compiled for it (one clear error, not one per test).
template <class Tester>
inline constexpr bool is_valid_tester = ModelTester<Tester> && skips_name_common_tests(skips_of<Tester>()) &&
                                        skips_have_reasons(skips_of<Tester>()) && skips_are_unique(skips_of<Tester>());

/// Each way a tester can be wrong, as its own readable message. Always true, so that the
/// static_assert around the call adds no error of its own.
template <class Tester>
constexpr bool assert_valid_tester() {
  static_assert(ModelTester<Tester>,
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): a tester needs `static constexpr const char* model_name`, "
                "make_model(), make_inputs() -> tracetorch::testing::Inputs, sizes() -> tracetorch::testing::ExpectedSizes "
                "and forward(model, inputs, options)");
  static_assert(skips_name_common_tests(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): Tester::skipped_tests names a test that is not a common test "
                "(the names are in tracetorch::testing::common_test_names)");
  static_assert(skips_have_reasons(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): every entry of Tester::skipped_tests needs a non-empty reason");
  static_assert(skips_are_unique(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): Tester::skipped_tests names the same test twice");
  return true;
}

/// The reason `Tester` skips common test number `index`, or nullptr when it runs it.
template <class Tester, std::size_t index>
inline constexpr const char* skip_reason_of = skip_reason<Tester>(common_test_t<index>::name);

/// "<model_name>: <test>", kept for the whole program: doctest keeps the pointer.
template <class Tester, std::size_t index>
const char* case_name() {
  if constexpr (is_valid_tester<Tester>) {
    static const std::string name = std::string(Tester::model_name) + ": " + std::string(common_test_t<index>::name);
    return name.c_str();
  } else {
    return common_test_t<index>::name.data();  // never runs: the tester does not compile
  }
}

// The decorators of a case. doctest applies each operand of `name * a * b` in turn, and a
// string operand sets the name; so a test the tester runs gets its name again (no change, any
// enclosing test suite's skip and description stay in force), a skipped one doctest::skip()
// and its reason as doctest::description.

template <class Tester, std::size_t index>
auto skip_decorator() {
  if constexpr (skip_reason_of<Tester, index> != nullptr) {
    return doctest::skip();
  } else {
    return case_name<Tester, index>();
  }
}

template <class Tester, std::size_t index>
auto description_decorator() {
  if constexpr (skip_reason_of<Tester, index> != nullptr) {
    return doctest::description(skip_reason_of<Tester, index>);
  } else {
    return case_name<Tester, index>();
  }
}

/// The decorators of one tester's cases, spelled with no comma between template arguments:
/// DOCTEST_TEST_CASE passes its one argument on to other macros.
template <class Tester>
struct CaseDecorators {
  template <std::size_t index>
  static const char* name() { return case_name<Tester, index>(); }
  template <std::size_t index>
  static auto skip() { return skip_decorator<Tester, index>(); }
  template <std::size_t index>
  static auto description() { return description_decorator<Tester, index>(); }
};

/// The body of one common test's case for one tester. A skipped test is called only under
/// doctest's --no-skip; its body may not even compile for this model, so it says why nothing
/// ran instead of passing silently.
template <class Tester, std::size_t index>
void run_common_test() {
  using Test = common_test_t<index>;
  if constexpr (!is_valid_tester<Tester>) {
    return;  // assert_valid_tester has failed the build
  } else if constexpr (skip_reason_of<Tester, index> == nullptr) {
    Test::template run<Tester>();
  } else {
    // Strings, not const char*: doctest prints a char pointer as an address.
    const std::string why = std::string(Tester::model_name) + " skips " + std::string(Test::name) +
                            ", so --no-skip has nothing to run: " + skip_reason_of<Tester, index>;
    DOCTEST_WARN_MESSAGE(false, why);
  }
}

}  // namespace tracetorch::testing::detail

/// One doctest case: common test number `index` for `Tester`.
#define TRACETORCH_DETAIL_COMMON_TEST(Tester, index)                                           \
  DOCTEST_TEST_CASE(::tracetorch::testing::detail::CaseDecorators<Tester>::name<index>() *        \
                    ::tracetorch::testing::detail::CaseDecorators<Tester>::skip<index>() *        \
                    ::tracetorch::testing::detail::CaseDecorators<Tester>::description<index>()) { \
    ::tracetorch::testing::detail::run_common_test<Tester, index>();                           \
  }

#undef TRACETORCH_DETAIL_DEFINE_COMMON_TEST  // defined in testing/fixture.hpp, for the four groups of tests
