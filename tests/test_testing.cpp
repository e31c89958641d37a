// tracetorch/testing.hpp: the common model tests ask for every output a model can return, the
// record keys its record map declares beyond hidden_states / attentions included, and check each
// one came back (on the Qwen2-MoE-style toy of tests/router_toys.hpp, which records router_logits).

#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

#include "router_toys.hpp"

namespace {

struct MoeTester {
  static constexpr const char* model_name = "MoeModel";
  router_toys::MoeConfig config{};
  router_toys::MoeModel make_model() const { return router_toys::MoeModel(config); }
  tracetorch::testing::Inputs make_inputs() const { return {{"inputs_embeds", torch::randn({2, 3, config.hidden_size})}}; }
  tracetorch::testing::ExpectedSizes sizes() const {
    return {.batch_size = 2, .seq_length = 3, .hidden_size = config.hidden_size, .num_hidden_layers = config.num_hidden_layers};
  }
  router_toys::MoeModelOutput forward(router_toys::MoeModel& model, const tracetorch::testing::Inputs& inputs,
                                      const tracetorch::OutputOptions& options) const {
    return model->forward(inputs.at("inputs_embeds"), options);
  }
};

/// A port that loses router_logits on the way out: what the common tests must catch.
struct LossyMoeTester : MoeTester {
  router_toys::MoeModelOutput forward(router_toys::MoeModel& model, const tracetorch::testing::Inputs& inputs,
                                      const tracetorch::OutputOptions& options) const {
    auto out = MoeTester::forward(model, inputs, options);
    out.router_logits.reset();
    return out;
  }
};

}  // namespace

DOCTEST_TEST_SUITE("testing") {

DOCTEST_TEST_CASE("common tests: all outputs include every record key the model declares (router_logits)") {
  const auto options = tracetorch::testing::detail::all_outputs<MoeTester>();
  DOCTEST_CHECK(options.output_hidden_states.has_value());
  DOCTEST_CHECK(options.output_attentions == true);
  DOCTEST_REQUIRE(options.output.size() == 1);
  DOCTEST_CHECK(options.output[0].key.name() == "router_logits");
  DOCTEST_CHECK(options.output[0].value);

  tracetorch::testing::detail::Setup<MoeTester> s;
  const auto out = s.forward(options);
  DOCTEST_REQUIRE(out.router_logits.has_value());
  DOCTEST_CHECK(out.router_logits->size() == 2);  // one router per layer
  DOCTEST_CHECK(out.hidden_states->size() == 3);
  DOCTEST_CHECK(out.attentions->size() == 2);
  // The tests that take all outputs pass on the model that returns them all.
  tracetorch::testing::detail::test_determinism::run<MoeTester>();
  tracetorch::testing::detail::test_model_outputs_equivalence::run<MoeTester>();
  tracetorch::testing::detail::test_capture_leaves_outputs_unchanged::run<MoeTester>();
}

// should_fail: the case passes only if an assertion in it fails, here the common test's check
// that router_logits, asked for, came back.
DOCTEST_TEST_CASE("common tests: a model that drops a declared key fails test_model_outputs_equivalence" *
                  doctest::should_fail()) {
  tracetorch::testing::detail::test_model_outputs_equivalence::run<LossyMoeTester>();
}

DOCTEST_TEST_CASE("common tests: a model that drops a declared key fails test_determinism" * doctest::should_fail()) {
  tracetorch::testing::detail::test_determinism::run<LossyMoeTester>();
}

}  // DOCTEST_TEST_SUITE
