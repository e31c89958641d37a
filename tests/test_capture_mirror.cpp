// tracetorch/capture.hpp against Python: the captured outputs of small models (count, order and
// values, in to_tuple order) equal those a Python mirror of transformers' capture rules computed
// on the same weights (tests/data/capture_mirror/make_capture_mirror.py).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <map>
#include <string>

#include "capture_toys.hpp"
#include "router_toys.hpp"
#include "test_helpers.hpp"

namespace {

std::filesystem::path mirror_dir() { return tracetorch_test::data_dir() / "capture_mirror"; }

const std::map<std::string, torch::Tensor>& mirror_tensors() {
  static const auto tensors = tracetorch::safetensors::load(mirror_dir() / "capture_mirror.safetensors");
  return tensors;
}

const boost::json::object& mirror_case(const std::string& name) {
  static const auto json = tracetorch_test::read_json(mirror_dir() / "capture_mirror.json");
  return json.at("cases").at(name).as_object();
}

bool same_values(const torch::Tensor& actual, const torch::Tensor& expected) {
  return actual.defined() && actual.sizes() == expected.sizes() && torch::equal(actual, expected);
}

/// `tuple` (to_tuple(out, model)) holds, in order, the fields Python's output held: a tensor, or
/// a tuple of as many tensors, each equal to Python's.
void check_against_python(const std::string& name, const tracetorch::OutputTuple& tuple) {
  const auto& items = mirror_case(name).at("items").as_array();
  DOCTEST_INFO("case ", name);
  DOCTEST_REQUIRE(tuple.size() == items.size());
  for (std::size_t k = 0; k < items.size(); ++k) {
    const std::string field(items[k].as_array()[0].as_string());
    const auto& count = items[k].as_array()[1];
    DOCTEST_INFO("item ", k, " (", field, ")");
    if (count.is_null()) {
      DOCTEST_REQUIRE(tuple[k].isTensor());
      DOCTEST_CHECK(same_values(tuple[k].toTensor(), mirror_tensors().at(name + "." + field)));
      continue;
    }
    DOCTEST_REQUIRE(tuple[k].isTensorList());
    const auto list = tuple[k].toTensorList();
    DOCTEST_REQUIRE(static_cast<std::int64_t>(list.size()) == count.as_int64());
    for (std::size_t i = 0; i < list.size(); ++i) {
      DOCTEST_INFO("value ", i);
      DOCTEST_CHECK(same_values(list.get(i), mirror_tensors().at(name + "." + field + "." + std::to_string(i))));
    }
  }
}

void load_parameters(torch::nn::Module& model, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(mirror_tensors().at(prefix + "." + item.key()));
}

}  // namespace

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
