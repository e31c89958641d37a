// tracetorch/output.hpp: options resolved against the config, to_tuple in both orders, and
// options in a trace as keywords.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "capture_toys.hpp"

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("flags come from the call's options, else the config, else false") {
  ToyModel model(2, 4);
  const auto x = torch::randn({1, 4});
  DOCTEST_CHECK_FALSE(model(x).hidden_states.has_value());
  model->config.output_hidden_states = true;
  model->config.output_attentions = true;
  const auto from_config = model(x);
  DOCTEST_CHECK(from_config.hidden_states.has_value());
  DOCTEST_CHECK(from_config.attentions.has_value());
  const auto overridden =
      model(x, tracetorch::OutputOptions{.output_hidden_states = false, .output_attentions = false});
  DOCTEST_CHECK_FALSE(overridden.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(overridden.attentions.has_value());
}

DOCTEST_TEST_CASE("to_tuple: fields in order, None left out, indexable") {
  ToyModel model(2, 4);
  const auto x = torch::randn({1, 4});
  const auto plain = tracetorch::to_tuple(model(x));
  DOCTEST_REQUIRE(plain.size() == 1);
  DOCTEST_CHECK(plain[0].isTensor());
  const auto full = model(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  const auto tuple = tracetorch::to_tuple(full);
  DOCTEST_REQUIRE(tuple.size() == 3);
  DOCTEST_CHECK(torch::equal(tuple[0].toTensor(), full.last_hidden_state));
  DOCTEST_CHECK(tuple[1].toTensorList().size() == full.hidden_states->size());
  DOCTEST_CHECK(torch::equal(tuple[2].toTensorList().get(1), (*full.attentions)[1]));
  const auto only_attentions = tracetorch::to_tuple(model(x, tracetorch::OutputOptions{.output_attentions = true}));
  DOCTEST_REQUIRE(only_attentions.size() == 2);
  DOCTEST_CHECK(only_attentions[1].toTensorList().size() == 2);
  DOCTEST_CHECK_THROWS_AS(tuple[3], tracetorch::Error);
}

DOCTEST_TEST_CASE("to_tuple(out, model): the forward's own fields first, then the captured ones, as upstream's ModelOutput") {
  OrderToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  const auto upstream = tracetorch::to_tuple(out, model);
  DOCTEST_REQUIRE(upstream.size() == 3);
  DOCTEST_CHECK(torch::equal(upstream[0].toTensor(), out.last_hidden_state));
  DOCTEST_CHECK(torch::equal(upstream[1].toTensor(), out.pooler_output));
  DOCTEST_CHECK(upstream[2].isTensorList());
  const auto declared = tracetorch::to_tuple(out);  // declaration order
  DOCTEST_CHECK(declared[0].isTensorList());
  // return_dict: the call, else the config, else true.
  DOCTEST_CHECK_FALSE(tracetorch::resolve_output_options(*model, {}).return_dict);
  DOCTEST_CHECK(tracetorch::resolve_output_options(*model, {.return_dict = true}).return_dict);
  DOCTEST_CHECK(tracetorch::resolve_output_options(*ToyModel(1, 4), {}).return_dict);
}

DOCTEST_TEST_CASE("options_as_kwargs: the output flags in the caller's order, use_cache on request, a layer list refused") {
  const auto options = tracetorch::output_options(
      {{"use_cache", false}, {"output_attentions", true}, {"return_dict", true}, {"output_hidden_states", false}});
  const auto names = [](const tracetorch::Kwargs& kwargs) {
    std::vector<std::string> out;
    for (const auto& [name, value] : kwargs.entries()) out.push_back(name);
    return out;
  };
  DOCTEST_CHECK(names(tracetorch::options_as_kwargs(options, false)) == std::vector<std::string>{"output_attentions", "output_hidden_states"});
  const auto with_cache = tracetorch::options_as_kwargs(options, true);
  DOCTEST_CHECK(names(with_cache) == std::vector<std::string>{"use_cache", "output_attentions", "output_hidden_states"});
  DOCTEST_CHECK(with_cache.flag("use_cache") == std::optional<bool>(false));
  DOCTEST_CHECK(with_cache.flag("output_hidden_states") == std::optional<bool>(false));
  DOCTEST_CHECK(tracetorch::options_as_kwargs(tracetorch::OutputOptions{}, true).entries().empty());
  tracetorch::OutputOptions listed;
  listed.output_hidden_states = tracetorch::layers{0, 2};
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::options_as_kwargs(listed, false),
                               doctest::Contains("output_hidden_states is handed on as **kwargs and must be True or False"),
                               tracetorch::Error);
}

DOCTEST_TEST_CASE("options given to a forward appear in a trace as kwargs holding only what was set") {
  ToyModel model(1, 4);
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model(torch::randn({1, 4}), tracetorch::OutputOptions{.output_hidden_states = tracetorch::layers{0, 1}});
  }
  const auto summary = tracetorch_test::read_json(dir / "ToyModel_debug_tree_SUMMARY.json");
  const auto& kwargs = summary.at("inputs").at("kwargs").as_object();
  DOCTEST_CHECK(kwargs.size() == 1);
  DOCTEST_CHECK(kwargs.at("output_hidden_states") == boost::json::array{"0", "1"});
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model(torch::randn({1, 4}), tracetorch::OutputOptions{.output_attentions = false});
  }
  DOCTEST_CHECK(tracetorch_test::read_json(dir / "ToyModel_debug_tree_SUMMARY.json").at("inputs").at("kwargs") ==
                boost::json::object{{"output_attentions", "False"}});
}

}  // DOCTEST_TEST_SUITE
