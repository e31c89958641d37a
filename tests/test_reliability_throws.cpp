// Reliability of the model addition debugger (issue 8): forwards that throw deep inside, a failure
// the model catches, tracing that fails midway. docs/reliability.md lists each case.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "reliability_helpers.hpp"

#include <set>
#include <stdexcept>
#include <vector>

namespace reliability_test {

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// Forwards that throw

DOCTEST_TEST_CASE("a forward that throws deep inside: previous trace, model and scope intact, next trace works") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    const auto reference_first = trace_files(model, outer_input(), use_repr);
    const auto reference_second = trace_files(model, outer_input(0.5), use_repr);
    DOCTEST_REQUIRE(reference_first != reference_second);
    const auto parameters = copy_parameters(*model);
    TempDir dir;
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    DOCTEST_CHECK(snapshot(dir.path()) == reference_first);
    const auto attached = attached_modules(*model);
    DOCTEST_CHECK(attached == 7);

    model->block->b->fail = true;  // three levels down, after block.a and block.b.lin ran
    DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(0.5)), "leaf failed", std::runtime_error);
    DOCTEST_CHECK(snapshot(dir.path()) == reference_first);  // no new, removed or changed file
    DOCTEST_CHECK(all_parameters_equal(*model, parameters));
    DOCTEST_CHECK(torch::GradMode::is_enabled());
    DOCTEST_CHECK(attached_modules(*model) == attached);

    model->block->b->fail = false;
    model(outer_input(0.5));
    DOCTEST_CHECK(snapshot(dir.path()) == reference_second);
  }
}

DOCTEST_TEST_CASE("a submodule failure the model catches: the trace goes on without that call") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    model->catch_block_failure = true;
    model->block->b->fail_on_call = 2;  // the second block call fails in block.b, after block.b.lin
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
      model(outer_input());
    }
    const auto full = read_json(dir / "Outer_debug_tree_FULL_TENSORS.json");
    DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Outer", "Outer.block", "Outer.block.a", "Outer.block.a.lin",
                                                                 "Outer.block.b", "Outer.block.b.lin", "Outer.head"});
    // No file of the failed call is left: exactly the referenced tensors and the two JSON files.
    std::vector<std::string> referenced;
    file_references(full, referenced);
    std::set<std::string> expected(referenced.begin(), referenced.end());
    expected.insert({"Outer_debug_tree_FULL_TENSORS.json", "Outer_debug_tree_SUMMARY.json"});
    if (!use_repr) expected.insert("Outer_outputs.safetensors");  // written, not referenced, as in Python
    DOCTEST_CHECK(names_of(snapshot(dir.path())) == expected);
    DOCTEST_CHECK(referenced.size() == (use_repr ? 0u : 10u));
  }
}

DOCTEST_TEST_CASE("tracing that fails midway (a tensor safetensors cannot hold) leaves the previous trace whole") {
  struct TwoInputsImpl : torch::nn::Module {
    TwoInputsImpl() {
      lin = register_module("lin", tracetorch::nn::Linear(4, 4));
      echo = register_module("echo", Echo());
    }
    torch::Tensor forward(torch::Tensor x, torch::Tensor extra) {
      auto y = lin(x);
      echo(extra);
      return y;
    }
    tracetorch::nn::Linear lin{nullptr};
    Echo echo{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(TwoInputs, TwoInputsImpl);
  torch::manual_seed(3);
  TwoInputs model;
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
  model(outer_input(), torch::ones({2}));
  const auto before = snapshot(dir.path());
  // The root's inputs are written first, so the failure comes after files were already staged.
  DOCTEST_CHECK_THROWS_AS(model(outer_input(1.0), torch::ones({2}, torch::kComplexDouble)), tracetorch::Error);
  DOCTEST_CHECK(snapshot(dir.path()) == before);
  model(outer_input(1.0), torch::ones({2}));
  DOCTEST_CHECK(snapshot(dir.path()) != before);
  DOCTEST_CHECK(names_of(snapshot(dir.path())) == names_of(before));
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
