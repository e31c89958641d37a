// tracetorch/record_map.hpp: what a record map's recorders select (subclasses, replacements,
// layer_name), their indices, and the attentions / cross_attentions split.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "capture_toys.hpp"

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("recorder targets match subclasses, as isinstance - compile-time replacements too") {
  const auto x = torch::randn({1, 4});
  FusedToyModel subclassed(2, 4);  // FusedToyAttnImpl derives from ToyAttnImpl
  const auto out = subclassed(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], torch::softmax(x, -1)));
  StaticToyModel static_model(2, 4);
  DOCTEST_CHECK(static_model(x, tracetorch::OutputOptions{.output_attentions = true}).attentions->size() == 2);
}

DOCTEST_TEST_CASE("layer_name is a substring of the path written with a leading dot, as upstream") {
  using tracetorch::detail::path_has_layer_name;
  DOCTEST_CHECK(path_has_layer_name("layer.0.crossattention.self", ".crossattention"));
  DOCTEST_CHECK(path_has_layer_name("crossattention", ".crossattention"));
  DOCTEST_CHECK(path_has_layer_name("h.0.attn", ".attn"));
  DOCTEST_CHECK(path_has_layer_name("layer.0.crossattention.self", "attention"));  // a substring matches
  DOCTEST_CHECK_FALSE(path_has_layer_name("layer.0.crossattention.self", ".attention"));
  DOCTEST_CHECK(path_has_layer_name("layer.0.attention_x.self", ".attention"));
  DOCTEST_CHECK(path_has_layer_name("anything", ""));
}

DOCTEST_TEST_CASE("two recorders under attentions: split by position into attentions and cross_attentions") {
  SelfCrossToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_REQUIRE(out.cross_attentions->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_CHECK(torch::equal((*out.attentions)[i], model->self_weights[i]));
    DOCTEST_CHECK(torch::equal((*out.cross_attentions)[i], model->cross_weights[i]));
  }
}

DOCTEST_TEST_CASE("recorder indices: OutputRecorder defaults to 0, a bare type to the field's - one tensor is recorded whole") {
  IndexToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  // attentions: OutputRecorder<ToyAttn> (index 0: x * 2), then ToyLayer as a bare type (index 1,
  // but it returns one tensor: recorded whole), then OptAttn's std::optional weights (None skipped).
  DOCTEST_REQUIRE(out.attentions->size() == 3);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], x * 2));
  DOCTEST_CHECK(torch::equal((*out.attentions)[1], model->layer_output));
  DOCTEST_CHECK(torch::equal((*out.attentions)[2], torch::softmax(x, -1)));
  DOCTEST_REQUIRE(out.cross_attentions->size() == 1);  // OutputRecorder<ToyAttn, -1>: the last element
  DOCTEST_CHECK(torch::equal(out.cross_attentions->front(), torch::softmax(x, -1)));
}

DOCTEST_TEST_CASE("cross-attention model: attentions and cross_attentions from one class, told apart by layer_name") {
  torch::manual_seed(5);
  bert::BertConfig config;
  bert::BertDecoderModel model(config);
  model->eval();
  const auto ids = torch::randint(0, config.vocab_size, {2, 5});
  const auto encoder_states = torch::randn({2, 9, config.hidden_size});
  const auto out = model(ids, encoder_states,
                         tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_REQUIRE(out.cross_attentions.has_value());
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_REQUIRE(out.cross_attentions->size() == 2);
  for (const auto& a : *out.attentions) DOCTEST_CHECK((a.sizes() == c10::IntArrayRef{2, 4, 5, 5}));
  for (const auto& c : *out.cross_attentions) DOCTEST_CHECK((c.sizes() == c10::IntArrayRef{2, 4, 5, 9}));
  DOCTEST_CHECK(out.hidden_states->size() == 3);
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.last_hidden_state));
  // cross_attentions follow output_attentions: off, both are None.
  const auto quiet = model(ids, encoder_states, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_CHECK_FALSE(quiet.attentions.has_value());
  DOCTEST_CHECK_FALSE(quiet.cross_attentions.has_value());
  // Capture leaves the outputs unchanged.
  DOCTEST_CHECK(torch::equal(quiet.last_hidden_state, out.last_hidden_state));
  // No encoder states: no cross-attention call, an empty list.
  const auto self_only = model(ids, torch::Tensor(), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_CHECK(self_only.cross_attentions->empty());
  DOCTEST_CHECK(self_only.attentions->size() == 2);
}

}  // DOCTEST_TEST_SUITE
