// tracetorch/customization.hpp: the three customization points, each declared by a type in its
// own namespace and found by argument-dependent lookup, as a traced call records them.

#include <doctest/doctest.h>

#include <tracetorch/tracetorch.hpp>

#include "test_helpers.hpp"

namespace customization_test {

struct Router {
  int top_k = 2;
};
inline std::string tracetorch_repr(const Router& r) { return "Router(top_k=" + std::to_string(r.top_k) + ")"; }

struct Pair {
  torch::Tensor first, second;
};
template <class Visit>
void tracetorch_fields(const Pair& p, Visit&& visit) {
  visit("first", p.first);
  visit("second", p.second);
}

struct Options {
  tracetorch::Keyword<int> top_k;
  tracetorch::Keyword<bool> normalize;
};
TRACETORCH_KEYWORDS(Options, top_k, normalize);

struct Plain {};

struct SplitImpl : torch::nn::Module {
  Pair forward(const torch::Tensor& x, const Router& router, const Options& options) {
    (void)router;
    (void)options;
    return {x * 2, x + 1};
  }
};
TRACETORCH_TRACEABLE_IMPL(Split, SplitImpl);

struct OuterImpl : torch::nn::Module {
  OuterImpl() { split = register_module("split", Split()); }
  torch::Tensor forward(const torch::Tensor& x) { return split(x, Router{.top_k = 3}, Options{.normalize = true}).first; }
  Split split{nullptr};
};
TRACETORCH_TRACEABLE_IMPL(Outer, OuterImpl);

}  // namespace customization_test

DOCTEST_TEST_SUITE("customization") {

DOCTEST_TEST_CASE("the concepts say which customization point a type has") {
  using namespace customization_test;
  static_assert(tracetorch::has_python_repr<Router> && !tracetorch::has_python_repr<Plain>);
  static_assert(tracetorch::has_named_fields<Pair> && !tracetorch::has_named_fields<Router>);
  static_assert(tracetorch::is_keyword_pack<Options> && !tracetorch::is_keyword_pack<Pair>);
  DOCTEST_CHECK(tracetorch::has_python_repr<Router>);
}

DOCTEST_TEST_CASE("a traced call records each customization point as Python would") {
  using namespace customization_test;
  Outer outer;
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(outer, {.debug_path = dir.path()});
    outer(torch::ones({2}));
  }
  const auto full = tracetorch_test::read_json(dir / "Outer_debug_tree_FULL_TENSORS.json");
  const auto& root = full.at("children").as_array()[0].as_object();
  DOCTEST_CHECK(root.at("module_path") == "Outer.split");
  const auto& inputs = root.at("inputs").as_object();
  DOCTEST_CHECK(inputs.at("args").as_array()[1] == "Router(top_k=3)");        // tracetorch_repr
  DOCTEST_CHECK(inputs.at("kwargs").as_object().size() == 1);                // tracetorch_keywords: only what was passed
  DOCTEST_CHECK(inputs.at("kwargs").as_object().at("normalize") == "True");
  const auto& outputs = root.at("outputs").as_object();                      // tracetorch_fields: a ModelOutput
  DOCTEST_CHECK(outputs.contains("first"));
  DOCTEST_CHECK(outputs.contains("second"));
}

}
