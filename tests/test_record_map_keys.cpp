// tracetorch/record_map.hpp and output.hpp: record keys beyond hidden_states / attentions
// (router_logits of a top-k router, asked for by output_router_logits from the call or the
// config), and recorder indices given by a function of the call's keywords or output.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "router_toys.hpp"
#include "test_helpers.hpp"

namespace {

using namespace router_toys;

MoeModel seeded_moe(MoeConfig config = {}) {
  torch::manual_seed(11);
  MoeModel model(config);
  torch::NoGradGuard no_grad;
  for (auto& parameter : model->parameters()) parameter.copy_(torch::randn(parameter.sizes()));
  return model;
}

/// Layer i's router output, recomputed from its input (hidden_states[i]): the attention's
/// residual, then the gate.
torch::Tensor router_of_layer(MoeModel& model, std::size_t i, const torch::Tensor& layer_input) {
  auto* layer = model->layers[i]->as<MoeDecoderLayer>();
  const auto h = layer_input + std::get<0>(layer->self_attn->forward(layer_input));
  return std::get<0>(layer->mlp->gate->forward(h.reshape({-1, h.size(-1)})));
}

/// SAM's mask decoder: its attentions key follows output_attentions, as upstream's exception.
struct MaskDecoderOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> mask_decoder_attentions;
};
TRACETORCH_OUTPUT(MaskDecoderOutput, last_hidden_state, mask_decoder_attentions);

struct MaskDecoderToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"mask_decoder_attentions", VarBlock>());  // a bare type: index 1
  MaskDecoderToyImpl() { block = register_module("block", VarBlock()); }
  MaskDecoderOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] { return MaskDecoderOutput{.last_hidden_state = block(x)[0]}; });
  }
  VarBlock block{nullptr};
};
TRACEABLE(MaskDecoderToy);

}  // namespace

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("record keys: router_logits, asked for by output_router_logits in the call, is the router's element 0") {
  auto model = seeded_moe();
  const auto x = torch::randn({2, 3, 4});
  const auto out = model(x, {.output_hidden_states = true, .output = {{"router_logits", true}}});
  DOCTEST_REQUIRE(out.router_logits.has_value());
  DOCTEST_REQUIRE(out.router_logits->size() == 2);  // one router per layer
  DOCTEST_REQUIRE(out.hidden_states->size() == 3);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_INFO("layer ", i);
    const auto& logits = (*out.router_logits)[i];
    DOCTEST_CHECK((logits.sizes() == c10::IntArrayRef{6, 4}));  // [tokens, experts]
    DOCTEST_CHECK(torch::allclose(logits.sum(-1), torch::ones({6})));
    DOCTEST_CHECK(torch::equal(logits, router_of_layer(model, i, (*out.hidden_states)[i])));
  }
  DOCTEST_CHECK_FALSE(out.attentions.has_value());  // its own flag, not asked for
  // Nothing asked for: None, and the result is the same.
  const auto plain = model(x);
  DOCTEST_CHECK_FALSE(plain.router_logits.has_value());
  DOCTEST_CHECK(torch::equal(plain.last_hidden_state, out.last_hidden_state));
}

DOCTEST_TEST_CASE("record keys: output_router_logits from the config unless the call says otherwise - the field named by member pointer") {
  auto model = seeded_moe();
  const auto x = torch::randn({1, 3, 4});
  DOCTEST_CHECK_FALSE(model(x).router_logits.has_value());
  model->config.output_router_logits = true;
  const auto from_config = model(x);
  DOCTEST_REQUIRE(from_config.router_logits.has_value());
  DOCTEST_CHECK(from_config.router_logits->size() == 2);
  DOCTEST_CHECK_FALSE(from_config.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(model(x, {.output = {{"router_logits", false}}}).router_logits.has_value());
  model->config.output_router_logits = false;
  const auto by_member = model(x, {.output = {{&MoeModelOutput::router_logits, true}}});
  DOCTEST_REQUIRE(by_member.router_logits.has_value());
  DOCTEST_CHECK(torch::equal(by_member.router_logits->back(), from_config.router_logits->back()));
  // resolve_output_options says the same (the output struct deduced from the forward).
  DOCTEST_CHECK(tracetorch::resolve_output_options(*model, {.output = {{"router_logits", true}}}).wants("router_logits"));
  DOCTEST_CHECK_FALSE(tracetorch::resolve_output_options(*model, {}).wants("router_logits"));
  model->config.output_router_logits = true;
  DOCTEST_CHECK(tracetorch::resolve_output_options<MoeModelOutput>(*model, {}).wants("router_logits"));
}

DOCTEST_TEST_CASE("record keys: a key no record map declares, or one given twice, is an error") {
  auto model = seeded_moe();
  const auto x = torch::randn({1, 2, 4});
  DOCTEST_CHECK_THROWS_WITH_AS(model(x, {.output = {{"router_logit", true}}}),
                               doctest::Contains("no record map in this program declares the key `router_logit`"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(model(x, {.output = {{"router_logits", true}, {"router_logits", false}}}),
                               doctest::Contains("output_router_logits is given twice"), tracetorch::Error);
}

DOCTEST_TEST_CASE("record keys: mask_decoder_attentions follows output_attentions, as upstream") {
  MaskDecoderToy model;
  const auto x = torch::randn({2, 4});
  DOCTEST_CHECK_FALSE(model(x).mask_decoder_attentions.has_value());
  const auto out = model(x, {.output_attentions = true});
  DOCTEST_REQUIRE(out.mask_decoder_attentions.has_value());
  DOCTEST_REQUIRE(out.mask_decoder_attentions->size() == 1);
  DOCTEST_CHECK(torch::equal(out.mask_decoder_attentions->front(), torch::softmax(x, -1)));
}

DOCTEST_TEST_CASE("record keys: output_router_logits appears in a trace as a keyword") {
  auto model = seeded_moe();
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model(torch::randn({1, 2, 4}), {.output = {{"router_logits", true}}});
  }
  const auto summary = tracetorch_test::read_json(dir / "MoeModel_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(summary.at("inputs").at("kwargs") == boost::json::object{{"output_router_logits", "True"}});
}

DOCTEST_TEST_CASE("index functions: the recorded element of a list whose length depends on the call") {
  const auto x = torch::randn({2, 4});
  const std::vector<torch::Tensor> expected{torch::softmax(x, -1), torch::softmax(x + 1, -1), torch::softmax(x + 2, -1)};
  const auto check = [&](const VarOutput& out) {
    DOCTEST_REQUIRE(out.attentions.has_value());
    DOCTEST_REQUIRE(out.attentions->size() == 3);
    for (std::size_t i = 0; i < 3; ++i) DOCTEST_CHECK(torch::equal((*out.attentions)[i], expected[i]));
  };
  DOCTEST_SUBCASE("of the call's keywords (use_cache passed true, false, and not passed)") {
    check(KeywordIndexModel()(x, {.output_attentions = true}));
  }
  DOCTEST_SUBCASE("of the output") { check(OutputIndexModel()(x, {.output_attentions = true})); }
  DOCTEST_SUBCASE("a negative index, counted from the end at run time") {
    check(LastIndexModel()(x, {.output_attentions = true}));
  }
  DOCTEST_SUBCASE("an index past the end is an error naming the module") {
    DOCTEST_CHECK_THROWS_WITH_AS(WrongIndexModel()(x, {.output_attentions = true}),
                                 doctest::Contains("recorder index 2 is out of range for block's output of 2 element(s)"),
                                 tracetorch::Error);
  }
  DOCTEST_SUBCASE("an index naming an element that is not a tensor is an error naming the module") {
    DOCTEST_CHECK_THROWS_WITH_AS(NotTensorIndexModel()(x, {.output_attentions = true}),
                                 doctest::Contains("recorder index 1 names an element of block's output that is not a tensor"),
                                 tracetorch::Error);
    DOCTEST_CHECK_NOTHROW(NotTensorIndexModel()(x));  // nothing asked for: nothing read
  }
}

DOCTEST_TEST_CASE("index functions: nested calls each get their own call's index") {
  NestedIndexModel model;
  const auto x = torch::randn({2, 4});
  const auto out = model(x, {.output_attentions = true});
  // outer(use_cache=true) calls inner(use_cache=false), then outer() calls inner(use_cache=true).
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_REQUIRE(out.cross_attentions->size() == 2);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], torch::softmax(x * 2, -1)));
  DOCTEST_CHECK(torch::equal((*out.attentions)[1], torch::softmax(x * 2, -1)));
  DOCTEST_CHECK(torch::equal((*out.cross_attentions)[0], torch::softmax(x, -1)));
  DOCTEST_CHECK(torch::equal((*out.cross_attentions)[1], torch::softmax(x, -1)));
}

DOCTEST_TEST_CASE("CallKeywords: what an index function reads") {
  tracetorch::CallKeywords kw;
  kw.add("use_cache", tracetorch::CallKeywords::Kind::boolean, 1);
  kw.add("layer_idx", tracetorch::CallKeywords::Kind::integer, 3);
  kw.add("past_key_values", tracetorch::CallKeywords::Kind::none);
  DOCTEST_CHECK(kw.flag("use_cache") == true);
  DOCTEST_CHECK(kw.integer("layer_idx") == 3);
  DOCTEST_CHECK_FALSE(kw.flag("layer_idx").has_value());  // not a bool
  DOCTEST_CHECK(kw.is_none("past_key_values"));
  DOCTEST_CHECK(kw.passed("past_key_values"));
  DOCTEST_CHECK_FALSE(kw.passed("attention_mask"));
  DOCTEST_CHECK_FALSE(kw.flag("attention_mask").has_value());
}

}  // DOCTEST_TEST_SUITE
