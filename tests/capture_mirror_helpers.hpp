#pragma once
// The Python mirror's fixtures (tests/data/capture_mirror, written by make_capture_mirror.py) and
// the check that a captured output equals what the mirror computed: shared by
// test_capture_mirror.cpp and test_capture_mirror_rules.cpp.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <map>
#include <string>

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
