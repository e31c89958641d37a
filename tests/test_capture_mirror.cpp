// tracetorch/capture.hpp against Python: the captured outputs of small models (count, order and
// values, in to_tuple order) equal those a Python mirror of transformers' capture rules computed
// on the same weights (tests/data/capture_mirror/make_capture_mirror.py).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "capture_mirror_helpers.hpp"
#include "capture_toys.hpp"
#include "router_toys.hpp"

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("against Python: router_logits through a declared key, output_router_logits from the call and the config") {
  router_toys::MoeModel model(router_toys::MoeConfig{});
  load_parameters(*model, "moe");
  const auto x = mirror_tensors().at("moe.input");
  check_against_python("moe.call", tracetorch::to_tuple(model(x, {.output_hidden_states = true,
                                                                     .output_attentions = true,
                                                                     .output = {{"router_logits", true}}}),
                                                         model));
  check_against_python("moe.off", tracetorch::to_tuple(model(x), model));
  model->config.output_router_logits = true;
  check_against_python("moe.config", tracetorch::to_tuple(model(x), model));
  check_against_python("moe.call_over_config",
                       tracetorch::to_tuple(model(x, {.output = {{"router_logits", false}}}), model));
}

DOCTEST_TEST_CASE("against Python: hidden states tied to last_hidden_state, or not - a model with no layers") {
  const auto x = mirror_tensors().at("toy.input");
  ToyModel model(3, 4);
  load_parameters(*model, "toy");
  check_against_python("toy.tied",
                       tracetorch::to_tuple(model(x, {.output_hidden_states = true, .output_attentions = true}), model));
  model->settings.tie_last_hidden_states = false;
  check_against_python("toy.untied", tracetorch::to_tuple(model(x, {.output_hidden_states = true}), model));
  ToyModel empty(0, 4);
  check_against_python("toy.no_layers",
                       tracetorch::to_tuple(empty(x, {.output_hidden_states = true, .output_attentions = true}), empty));
}

DOCTEST_TEST_CASE("against Python: two recorders under attentions split into attentions and cross_attentions") {
  SelfCrossToy model;
  check_against_python("selfcross.split",
                       tracetorch::to_tuple(model(mirror_tensors().at("selfcross.input"), {.output_attentions = true}), model));
}

DOCTEST_TEST_CASE("against Python: hidden states tied to vision_hidden_states") {
  VisionToy model;
  load_parameters(*model, "vision");
  check_against_python("vision.tied",
                       tracetorch::to_tuple(model(mirror_tensors().at("vision.input"), {.output_hidden_states = true}), model));
}

}  // DOCTEST_TEST_SUITE
