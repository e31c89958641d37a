// tracetorch/module.hpp and nn.hpp: TRACEABLE, the traced built-ins, and which call paths are traced.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

namespace {

struct ScaleImpl : torch::nn::Module {
  explicit ScaleImpl(double factor = 2.0) : factor(factor) {}
  // A default argument: the holder call `scale(x)` must still compile and be traced.
  torch::Tensor forward(torch::Tensor x, double extra = 0.0) { return x * factor + extra; }
  double factor;

 protected:
  // As in LibTorch: Sequential/AnyModule apply default arguments only when declared.
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(0.0)})
};
TRACEABLE(Scale);

struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    seq = register_module("seq", tracetorch::nn::Sequential(tracetorch::nn::Linear(4, 4), tracetorch::nn::ReLU(),
                                                            Scale(3.0), tracetorch::nn::Tanh()));
    list = register_module("list", tracetorch::nn::ModuleList());
    list->push_back(Scale(1.0));
    list->push_back(Scale(2.0));
    plain = register_module("plain", torch::nn::Linear(4, 4));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = seq->forward(x);
    for (const auto& item : *list) y = item->as<Scale>()->forward(y, 0.0);
    return plain(y);
  }
  tracetorch::nn::Sequential seq{nullptr};
  tracetorch::nn::ModuleList list{nullptr};
  torch::nn::Linear plain{nullptr};
};
TRACEABLE(Block);

struct ConstForwardImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) const { return x + 1; }
};
TRACEABLE(ConstForward);

struct OverloadedImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x + 1; }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y) { return x + y; }
};
TRACEABLE(Overloaded);

// Cloneable, as LibTorch requires for clone(): submodules registered in reset().
struct CloneableMlpImpl : torch::nn::Cloneable<CloneableMlpImpl> {
  CloneableMlpImpl() { reset(); }
  void reset() override {
    fc = register_module("fc", tracetorch::nn::Linear(4, 4));
    act = register_module("act", tracetorch::nn::Tanh());
  }
  torch::Tensor forward(const torch::Tensor& x) { return act(fc(x)); }
  tracetorch::nn::Linear fc{nullptr};
  tracetorch::nn::Tanh act{nullptr};
};
TRACEABLE(CloneableMlp);

std::vector<std::string> paths_of(const boost::json::value& node) {
  std::vector<std::string> out{std::string(node.at("module_path").as_string())};
  if (const auto* children = node.as_object().if_contains("children")) {
    for (const auto& child : children->as_array()) {
      auto sub = paths_of(child);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  }
  return out;
}

}  // namespace

DOCTEST_TEST_SUITE("module") {

DOCTEST_TEST_CASE("TRACEABLE registers the name and keeps the TORCH_MODULE holder interface") {
  Scale scale;
  DOCTEST_CHECK(scale->traced_name() == "Scale");
  DOCTEST_CHECK(std::string(tracetorch::nn::Linear(2, 3)->traced_name()) == "Linear");
  static_assert(std::is_same_v<Scale::Impl, ScaleImpl>);
  static_assert(tracetorch::is_traceable_v<Scale>);
  static_assert(tracetorch::is_traceable_v<ScaleImpl>);
  static_assert(tracetorch::is_traceable_v<tracetorch::nn::Linear>);
  static_assert(!tracetorch::is_traceable_v<torch::nn::Linear>);
  static_assert(!tracetorch::is_traceable_v<torch::nn::LinearImpl>);
  Scale null_holder{nullptr};
  DOCTEST_CHECK(null_holder.is_empty());
  const auto x = torch::ones({2});
  DOCTEST_CHECK(torch::equal(scale(x), x * 2));           // default argument through the holder
  DOCTEST_CHECK(torch::equal(scale(x, 1.0), x * 2 + 1));
  DOCTEST_CHECK(torch::equal(scale->forward(x, 0.5), x * 2 + 0.5));
  ConstForward constant;
  DOCTEST_CHECK(torch::equal(constant(x), x + 1));
  Overloaded overloaded;
  DOCTEST_CHECK(torch::equal(overloaded(x, x), x * 2));
}

DOCTEST_TEST_CASE("the traced built-ins behave like LibTorch's") {
  torch::manual_seed(0);
  torch::nn::Linear plain(torch::nn::LinearOptions(5, 3).bias(true));
  tracetorch::nn::Linear traced(torch::nn::LinearOptions(5, 3).bias(true));
  {
    torch::NoGradGuard no_grad;
    traced->weight.copy_(plain->weight);
    traced->bias.copy_(plain->bias);
  }
  const auto x = torch::randn({2, 5});
  DOCTEST_CHECK(torch::allclose(plain(x), traced(x)));
  DOCTEST_CHECK(traced->named_parameters().size() == 2);
  tracetorch::nn::LayerNorm norm(torch::nn::LayerNormOptions({5}));
  DOCTEST_CHECK(norm(x).sizes() == x.sizes());
  tracetorch::nn::Conv1d conv1(torch::nn::Conv1dOptions(2, 4, 3));
  DOCTEST_CHECK(conv1(torch::randn({1, 2, 8})).sizes() == c10::IntArrayRef{1, 4, 6});
  tracetorch::nn::Conv2d conv2(torch::nn::Conv2dOptions(2, 4, 3));
  DOCTEST_CHECK(conv2(torch::randn({1, 2, 8, 8})).sizes() == c10::IntArrayRef{1, 4, 6, 6});
  tracetorch::nn::Embedding embedding(10, 4);
  DOCTEST_CHECK(embedding(torch::tensor({1, 2, 3})).sizes() == c10::IntArrayRef{3, 4});
  tracetorch::nn::Dropout dropout(0.5);
  dropout->eval();
  DOCTEST_CHECK(torch::equal(dropout(x), x));
  DOCTEST_CHECK(torch::allclose(tracetorch::nn::GELU()(x), torch::gelu(x)));
  DOCTEST_CHECK(torch::allclose(tracetorch::nn::SiLU()(x), torch::silu(x)));
}

DOCTEST_TEST_CASE("holder calls, ->forward, Sequential elements and ModuleList loops are each traced") {
  Block block;
  tracetorch_test::TempDir dir;
  std::vector<std::string> untraced;
  {
    auto guard = tracetorch::model_addition_debugger(block, {.debug_path = dir.path(), .do_prune_layers = false});
    untraced = guard.untraced_modules();
    block(torch::ones({1, 4}));
  }
  DOCTEST_CHECK(untraced == std::vector<std::string>{"Block.plain"});
  const auto summary = tracetorch_test::read_json(dir / "Block_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(paths_of(summary) == std::vector<std::string>{"Block", "Block.seq", "Block.seq.0", "Block.seq.1",
                                                              "Block.seq.2", "Block.seq.3", "Block.list.0",
                                                              "Block.list.1"});
  // The Scale call inside the ModuleList loop passed two arguments: both are recorded.
  const auto& list_call = summary.at("children").as_array().at(1);
  DOCTEST_CHECK(list_call.at("inputs").at("args").as_array().size() == 2);
  DOCTEST_CHECK(list_call.at("inputs").at("args").at(1) == "0.0");
}

DOCTEST_TEST_CASE("a clone of a traced module is traced, fits its holder and has its own parameters") {
  CloneableMlp original;
  CloneableMlp copy(std::dynamic_pointer_cast<CloneableMlp::ContainedType>(original->clone()));
  DOCTEST_REQUIRE_FALSE(copy.is_empty());
  DOCTEST_CHECK(torch::equal(copy->fc->weight, original->fc->weight));
  DOCTEST_CHECK_FALSE(copy->fc->weight.is_same(original->fc->weight));
  const auto x = torch::randn({2, 4});
  DOCTEST_CHECK(torch::equal(copy(x), original(x)));

  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(copy, {.debug_path = dir.path(), .do_prune_layers = false});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    copy(x);
  }
  const auto summary = tracetorch_test::read_json(dir / "CloneableMlp_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(paths_of(summary) == std::vector<std::string>{"CloneableMlp", "CloneableMlp.fc", "CloneableMlp.act"});

  // Sequential clones its elements through their own clone(): they stay traced too.
  tracetorch::nn::Sequential seq(tracetorch::nn::Linear(4, 4), tracetorch::nn::Tanh());
  tracetorch::nn::Sequential seq_copy(std::dynamic_pointer_cast<tracetorch::nn::Sequential::ContainedType>(seq->clone()));
  DOCTEST_REQUIRE_FALSE(seq_copy.is_empty());
  DOCTEST_CHECK(torch::equal(seq_copy->forward(x), seq->forward(x)));
  tracetorch_test::TempDir seq_dir;
  {
    auto guard = tracetorch::model_addition_debugger(seq_copy, {.debug_path = seq_dir.path(), .do_prune_layers = false});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    seq_copy->forward(x);
  }
  DOCTEST_CHECK(paths_of(tracetorch_test::read_json(seq_dir / "Sequential_debug_tree_SUMMARY.json")) ==
                std::vector<std::string>{"Sequential", "Sequential.0", "Sequential.1"});

  // A module that is not Cloneable keeps LibTorch's error.
  Block block;
  DOCTEST_CHECK_THROWS_WITH_AS(block->clone(), doctest::Contains("clone() has not been implemented"), c10::Error);
}

DOCTEST_TEST_CASE("a call through the Impl type is not traced (documented)") {
  Block block;
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(block, {.debug_path = dir.path()});
    block(torch::ones({1, 4}));
    // Calling the Impl's forward directly bypasses the traced wrapper: no new trace.
    std::filesystem::remove_all(dir.path());
    static_cast<BlockImpl&>(*block).forward(torch::ones({1, 4}));
  }
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir.path()));
}

}  // DOCTEST_TEST_SUITE
