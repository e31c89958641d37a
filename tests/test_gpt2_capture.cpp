// examples/gpt2's record map (GPT2ModelImpl::can_record_outputs): the hidden_states and attentions
// it captures, against those the Python reference's GPT2Model collects by hand as upstream's
// does at c44b2d99 (tests/data/gpt2/capture.safetensors, written by make_gpt2_fixture.py).

#include <doctest/doctest.h>

#include "gpt2_fixture.hpp"

#include <string>
#include <vector>

namespace {

using gpt2_test::fixture_ids;
using gpt2_test::fixture_model;
using gpt2_test::gpt2_dir;

/// The reference's "<run>.<field>.<i>" tensors in the order of i; every tensor of the file is
/// one run's, so a run the C++ side drops or a wrong count shows.
std::vector<torch::Tensor> reference(const std::string& run, const std::string& field) {
  tracetorch::safetensors::Reader reader(gpt2_dir() / "capture.safetensors");
  std::vector<torch::Tensor> tensors;
  while (true) {
    const std::string name = run + "." + field + "." + std::to_string(tensors.size());
    bool found = false;
    for (const auto& info : reader.header().tensors) found = found || info.name == name;
    if (!found) return tensors;
    tensors.push_back(reader.load(name));
  }
}

/// Count, order and values: each captured tensor equals the reference's at its position, bit for
/// bit (the port computes operation for operation as the reference does, as its trace shows).
void check_matches_reference(const std::optional<std::vector<torch::Tensor>>& captured, const std::string& run,
                             const std::string& field, std::size_t expected_count) {
  DOCTEST_INFO(run << "." << field);
  const auto expected = reference(run, field);
  DOCTEST_REQUIRE(expected.size() == expected_count);
  DOCTEST_REQUIRE(captured.has_value());
  DOCTEST_REQUIRE(captured->size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    DOCTEST_INFO("position " << i);
    DOCTEST_CHECK((*captured)[i].sizes() == expected[i].sizes());
    DOCTEST_CHECK(torch::equal((*captured)[i], expected[i]));
  }
  // The positions hold different values, so a capture in another order would fail above.
  for (std::size_t i = 1; i < expected.size(); ++i) DOCTEST_CHECK_FALSE(torch::equal(expected[i - 1], expected[i]));
}

}  // namespace

DOCTEST_TEST_SUITE("gpt2") {

DOCTEST_TEST_CASE("gpt2 capture: hidden_states and attentions equal the Python reference's, with and without a cache") {
  auto model = fixture_model();
  torch::NoGradGuard no_grad;
  const auto ids = fixture_ids();
  for (const bool use_cache : {true, false}) {
    const std::string run = use_cache ? "cache" : "no_cache";
    // The block puts its weights at 2 with a cache and at 1 without: one index function reads both.
    const auto out = model({.input_ids = ids, .use_cache = use_cache, .output_attentions = true, .output_hidden_states = true});
    check_matches_reference(out.hidden_states, run, "hidden_states", 3);  // the blocks' inputs, then ln_f's output
    check_matches_reference(out.attentions, run, "attentions", 2);        // one [2, 2, 5, 5] per block
    DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.last_hidden_state));
    DOCTEST_CHECK(out.past_key_values.has_value() == use_cache);
    DOCTEST_CHECK_FALSE(out.cross_attentions.has_value());  // not in the record map: cross-attention is not ported
  }
}

DOCTEST_TEST_CASE("gpt2 capture: a step after a cached call (past_key_values passed) equals the reference's") {
  auto model = fixture_model();
  torch::NoGradGuard no_grad;
  const auto ids = fixture_ids();
  using torch::indexing::Slice;
  const auto first = model({.input_ids = ids.index({Slice(), Slice(0, 3)}), .use_cache = true});
  DOCTEST_CHECK_FALSE(first.hidden_states.has_value());  // not asked for: nothing captured
  DOCTEST_CHECK_FALSE(first.attentions.has_value());
  const auto step = model({.input_ids = ids.index({Slice(), Slice(3, 5)}),
                           .past_key_values = *first.past_key_values,
                           .use_cache = true,
                           .output_attentions = true,
                           .output_hidden_states = true});
  check_matches_reference(step.hidden_states, "step", "hidden_states", 3);
  check_matches_reference(step.attentions, "step", "attentions", 2);  // [2, 2, 2, 5]: two queries, five keys
}

DOCTEST_TEST_CASE("gpt2 capture: the block's output changes length with use_cache, and the record's index follows") {
  auto model = fixture_model();
  torch::NoGradGuard no_grad;
  const auto h = model->wte(fixture_ids());
  auto block = model->h[0]->as<gpt2::GPT2Block>();
  const auto with_cache = block->forward(h, {.use_cache = true, .output_attentions = true});
  const auto without = block->forward(h, {.use_cache = false, .output_attentions = true});
  DOCTEST_REQUIRE(with_cache.size() == 3);  // (hidden_states, present, attentions)
  DOCTEST_REQUIRE(without.size() == 2);     // (hidden_states, attentions)
  DOCTEST_CHECK(with_cache[1].sizes() == torch::IntArrayRef({2, 2, 2, 5, 4}));  // (key, value) stacked
  DOCTEST_CHECK(torch::equal(with_cache[2], without[1]));
  DOCTEST_CHECK(block->forward(h, {.use_cache = false}).size() == 1);  // no weights unless asked for

  tracetorch::CallKeywords cached, uncached, unsaid;
  cached.add("use_cache", tracetorch::CallKeywords::Kind::boolean, 1);
  uncached.add("use_cache", tracetorch::CallKeywords::Kind::boolean, 0);
  DOCTEST_CHECK(gpt2::block_attentions_index(cached) == 2);
  DOCTEST_CHECK(gpt2::block_attentions_index(uncached) == 1);
  DOCTEST_CHECK(gpt2::block_attentions_index(unsaid) == 1);  // the block's default, use_cache=False
}

DOCTEST_TEST_CASE("gpt2 capture: the flags come from the call, else the config (false by default)") {
  auto model = fixture_model();
  torch::NoGradGuard no_grad;
  const auto ids = fixture_ids();
  const auto plain = model({.input_ids = ids});
  DOCTEST_CHECK_FALSE(plain.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(plain.attentions.has_value());

  model->config.output_attentions = true;
  model->config.output_hidden_states = true;
  const auto from_config = model({.input_ids = ids, .use_cache = false});
  check_matches_reference(from_config.hidden_states, "no_cache", "hidden_states", 3);
  check_matches_reference(from_config.attentions, "no_cache", "attentions", 2);

  const auto refused = model({.input_ids = ids, .output_attentions = false, .output_hidden_states = false});
  DOCTEST_CHECK_FALSE(refused.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(refused.attentions.has_value());
}

DOCTEST_TEST_CASE("gpt2 capture: under the debugger the same values, the blocks traced with the keywords passed") {
  auto model = fixture_model();
  const auto ids = fixture_ids();
  tracetorch_test::TempDir dir;
  gpt2::BaseModelOutputWithPastAndCrossAttentions out;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    out = model({.input_ids = ids, .output_attentions = true, .output_hidden_states = true});
  }
  check_matches_reference(out.hidden_states, "cache", "hidden_states", 3);
  check_matches_reference(out.attentions, "cache", "attentions", 2);
  const auto summary = tracetorch_test::read_json(dir / "GPT2Model_debug_tree_SUMMARY.json");
  const auto& block = summary.at("children").as_array().at(3);
  DOCTEST_CHECK(block.at("module_path") == "GPT2Model.h.0");
  const auto& block_kwargs = block.at("inputs").at("kwargs");
  DOCTEST_CHECK(block_kwargs.at("use_cache") == "True");
  DOCTEST_CHECK(block_kwargs.at("output_attentions") == "True");
}

}  // DOCTEST_TEST_SUITE
