// TRACETORCH_DISABLE: every macro and scope compiles to nothing. Built as its own program with
// the macro defined globally; an annotated model (TRACEABLE, tracetorch::nn, a record map,
// capture_outputs, the debugger scope) must still build, compute the same values, and write nothing.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <filesystem>
#include <type_traits>

#include "bert/bert.hpp"

#ifndef TRACETORCH_DISABLE
#error "this test is built with TRACETORCH_DISABLE defined"
#endif

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    up = register_module("up", tracetorch::nn::Linear(4, 8));
    act = register_module("act", tracetorch::nn::GELU());
    down = register_module("down", tracetorch::nn::Linear(8, 4));
  }
  torch::Tensor forward(const torch::Tensor& x) { return down(act(up(x))); }
  tracetorch::nn::Linear up{nullptr}, down{nullptr};
  tracetorch::nn::GELU act{nullptr};
};
TRACEABLE(Mlp);

}  // namespace

DOCTEST_TEST_CASE("TRACETORCH_DISABLE: plain LibTorch types, same values, nothing written") {
  // The annotations are LibTorch's own types: no traced wrapper, no attachment pointer.
  static_assert(std::is_same_v<tracetorch::nn::Linear, torch::nn::Linear>);
  static_assert(std::is_same_v<Mlp::ContainedType, MlpImpl>);
  static_assert(!std::is_base_of_v<tracetorch::detail::TracedModuleBase, Mlp::ContainedType>);

  torch::manual_seed(0);
  Mlp mlp;
  const auto x = torch::randn({2, 4});
  const auto expected = mlp->down->forward(torch::gelu(mlp->up->forward(x)));
  const auto dir = std::filesystem::temp_directory_path() / "tracetorch-disable-test";
  std::filesystem::remove_all(dir);
  torch::Tensor traced;
  {
    auto guard = tracetorch::model_addition_debugger(mlp, {.debug_path = dir});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    DOCTEST_CHECK(guard.summary_path().empty());
    traced = mlp(x);
  }
  DOCTEST_CHECK(torch::equal(traced, expected));
  DOCTEST_CHECK_FALSE(std::filesystem::exists(dir));  // not even created

  // A model with a record map: capture compiles to the plain body; nothing is collected.
  bert::BertConfig config;
  bert::BertDecoderModel model(config);
  model->eval();
  const auto ids = torch::randint(0, config.vocab_size, {1, 3});
  const auto out = model(ids, torch::randn({1, 2, config.hidden_size}),
                         tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  DOCTEST_CHECK((out.last_hidden_state.sizes() == c10::IntArrayRef{1, 3, config.hidden_size}));
  DOCTEST_CHECK_FALSE(out.hidden_states.has_value());
  DOCTEST_CHECK_FALSE(out.attentions.has_value());
}
