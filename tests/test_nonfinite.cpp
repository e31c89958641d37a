// tracetorch/nonfinite.hpp: the non-finite sentinel names the first module call whose outputs
// hold NaN or Inf while its inputs were finite, on its own, as a debugger option and as a call's
// option, in a toy model (a division by zero) and in the Llama port (a NaN planted in a weight).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace nonfinite_test {

/// x / divisor: a division by zero where the test sets the divisor to zero.
struct DivideImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& divisor) { return x / divisor; }
};
TRACEABLE(Divide);

/// Divides its input by zero in place, and returns it.
struct DivideInPlaceImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x.div_(0.0); }
};
TRACEABLE(DivideInPlace);

/// x * 1e38: finite where |x| < 3.4, +Inf or -Inf beyond.
struct ScaleUpImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x * 1e38; }
};
TRACEABLE(ScaleUp);

struct ToyOutput {
  torch::Tensor last_hidden_state;
  torch::Tensor scaled;
};
TRACETORCH_OUTPUT(ToyOutput, last_hidden_state, scaled);

/// first (Linear) -> divide (by `divisor`) -> divide again (by `second_divisor`) -> last (Linear).
struct ToyNetImpl : torch::nn::Module {
  ToyNetImpl() {
    first = register_module("first", tracetorch::nn::Linear(4, 4));
    divide = register_module("divide", Divide());
    last = register_module("last", tracetorch::nn::Linear(4, 3));
  }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    (void)options;
    auto h = divide(first(x), divisor);
    h = divide(h, second_divisor);
    return {last(h), h * 2};
  }
  torch::Tensor divisor = torch::ones({4});
  torch::Tensor second_divisor = torch::ones({4});
  tracetorch::nn::Linear first{nullptr}, last{nullptr};
  Divide divide{nullptr};
};
TRACEABLE(ToyNet);

struct InPlaceNetImpl : torch::nn::Module {
  InPlaceNetImpl() {
    first = register_module("first", tracetorch::nn::Linear(4, 4));
    divide = register_module("divide", DivideInPlace());
  }
  torch::Tensor forward(const torch::Tensor& x) { return divide(first(x)); }
  tracetorch::nn::Linear first{nullptr};
  DivideInPlace divide{nullptr};
};
TRACEABLE(InPlaceNet);

/// Divides by zero in its own code, between two traced calls.
struct SelfDividingImpl : torch::nn::Module {
  SelfDividingImpl() {
    first = register_module("first", tracetorch::nn::Linear(4, 4));
    last = register_module("last", tracetorch::nn::Linear(4, 3));
  }
  ToyOutput forward(const torch::Tensor& x) {
    const auto h = first(x) / 0.0;
    return {last(h), h};
  }
  tracetorch::nn::Linear first{nullptr}, last{nullptr};
};
TRACEABLE(SelfDividing);

ToyNet make_toy() {
  torch::manual_seed(4);
  ToyNet model;
  return model;
}

/// NaN, +Inf, -Inf that x / 0 makes, counted on x itself.
struct Expected {
  std::int64_t nan, positive_inf, negative_inf, elements;
};
Expected divided_by_zero(const torch::Tensor& x) {
  return {(x == 0).sum().item<std::int64_t>() + torch::isnan(x).sum().item<std::int64_t>(),
          (x > 0).sum().item<std::int64_t>(), (x < 0).sum().item<std::int64_t>(), x.numel()};
}

void expect_counts(const tracetorch::NonFinite& found, const Expected& expected) {
  DOCTEST_CHECK(found.nan == expected.nan);
  DOCTEST_CHECK(found.positive_inf == expected.positive_inf);
  DOCTEST_CHECK(found.negative_inf == expected.negative_inf);
  DOCTEST_CHECK(found.elements == expected.elements);
}

/// The input of the Llama port with NaN in one weight of layer 1's down_proj: row 5 of the
/// weight is output element 5 of every position, so one NaN per position.
llama::LlamaModel llama_with_nan_weight() {
  auto model = tracetorch_test::make_tiny_llama();
  auto& mlp = model->layers[1]->as<llama::LlamaDecoderLayerImpl>()->mlp;
  const torch::NoGradGuard no_grad;
  mlp->down_proj->weight[5][7] = std::numeric_limits<float>::quiet_NaN();
  return model;
}

void expect_llama_down_proj(const std::optional<tracetorch::NonFinite>& found, const torch::Tensor& ids) {
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "LlamaModel.layers.1.mlp.down_proj");
  DOCTEST_CHECK(found->call == 1);
  DOCTEST_CHECK(found->location == "outputs");
  DOCTEST_CHECK_FALSE(found->in_root_inputs);
  const std::int64_t positions = ids.numel();
  DOCTEST_CHECK(found->nan == positions);
  DOCTEST_CHECK(found->positive_inf + found->negative_inf == 0);
  DOCTEST_CHECK(found->elements == positions * 64);  // hidden_size 64
  DOCTEST_CHECK(found->message() == "first non-finite: LlamaModel.layers.1.mlp.down_proj (call 1) outputs: " +
                                        std::to_string(positions) + " of " + std::to_string(positions * 64) +
                                        " elements NaN");
}

}  // namespace nonfinite_test

using namespace nonfinite_test;

DOCTEST_TEST_CASE("sentinel: a division by zero in one module is named, with its output and counts") {
  auto model = make_toy();
  const auto x = torch::randn({2, 4});
  const auto h = model->first(x);  // the divided values, to count what x / 0 makes
  model->divisor = torch::zeros({4});
  auto sentinel = tracetorch::find_nonfinite(model);
  model(x);
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "ToyNet.divide");
  DOCTEST_CHECK(found->call == 1);
  DOCTEST_CHECK(found->location == "outputs");
  DOCTEST_CHECK_FALSE(found->in_root_inputs);
  DOCTEST_CHECK(found->changed_in_place.empty());
  expect_counts(*found, divided_by_zero(h));
  tracetorch::NonFinite same = *found;
  DOCTEST_CHECK(tracetorch::nonfinite_message(same) == found->message());
  DOCTEST_CHECK(found->message().starts_with("first non-finite: ToyNet.divide (call 1) outputs: "));
}

DOCTEST_TEST_CASE("sentinel: finite values whose sum overflows are finite; +Inf beside -Inf is not") {
  ScaleUp model;
  const auto threes = torch::full({4}, 3.0f);  // 3e38 each, under float's 3.4e38
  DOCTEST_REQUIRE(std::isinf(model->forward(threes).sum().item<float>()));  // the sum alone would say non-finite
  auto sentinel = tracetorch::find_nonfinite(model);  // after the check above, so that it sees only the calls below
  model(threes);
  DOCTEST_CHECK_FALSE(sentinel.first().has_value());
  model(torch::tensor({5.0f, -5.0f, 1.0f}));  // +Inf, -Inf, 1e38: their sum is NaN
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "ScaleUp");
  DOCTEST_CHECK(found->call == 1);  // counted within its forward, the second
  DOCTEST_CHECK(found->nan == 0);
  DOCTEST_CHECK(found->positive_inf == 1);
  DOCTEST_CHECK(found->negative_inf == 1);
  DOCTEST_CHECK(found->elements == 3);
}

DOCTEST_TEST_CASE("sentinel: the message lists each kind as N of M elements") {
  tracetorch::NonFinite found{.module_path = "M.a", .call = 2, .location = "outputs.0", .nan = 1, .positive_inf = 2,
                              .negative_inf = 3, .elements = 10};
  DOCTEST_CHECK(found.message() ==
                "first non-finite: M.a (call 2) outputs.0: 1 of 10 elements NaN, 2 of 10 elements +Inf, 3 of 10 elements -Inf");
  found = {.module_path = "M", .location = "inputs.args.0", .in_root_inputs = true, .negative_inf = 1, .elements = 4};
  DOCTEST_CHECK(found.message() == "first non-finite: M (call 1) inputs.args.0: 1 of 4 elements -Inf, already in the root's inputs");
}

DOCTEST_TEST_CASE("sentinel: a module called twice whose second call goes non-finite is named as call 2") {
  auto model = make_toy();
  const auto x = torch::randn({3, 4});
  const auto h = model->first(x);
  model->second_divisor = torch::zeros({4});
  auto sentinel = tracetorch::find_nonfinite(model);
  model(x);
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "ToyNet.divide");
  DOCTEST_CHECK(found->call == 2);  // as the debugger's _call2 files and tracetorch-diff's "(call 2)"
  expect_counts(*found, divided_by_zero(h));
}

DOCTEST_TEST_CASE("sentinel: a clean forward finds nothing, in each of the three ways") {
  auto model = make_toy();
  const auto x = torch::randn({2, 4});
  {
    auto sentinel = tracetorch::find_nonfinite(model);
    model(x);
    model(x);
    DOCTEST_CHECK_FALSE(sentinel.first().has_value());
  }
  tracetorch_test::TempDir dir;
  {
    auto scope = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .find_nonfinite = true});
    model(x);
    DOCTEST_CHECK_FALSE(scope.first_nonfinite().has_value());
  }
  std::optional<tracetorch::NonFinite> found = tracetorch::NonFinite{.module_path = "stale"};
  model(x, {.find_nonfinite = &found});
  DOCTEST_CHECK_FALSE(found.has_value());  // emptied by the call, nothing found
}

DOCTEST_TEST_CASE("sentinel: non-finite inputs of the root are reported as such, by location") {
  auto model = make_toy();
  auto x = torch::randn({2, 4});
  x[1][2] = std::numeric_limits<float>::infinity();
  x[0][0] = std::numeric_limits<float>::quiet_NaN();
  auto sentinel = tracetorch::find_nonfinite(model);
  model(x);
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "ToyNet");
  DOCTEST_CHECK(found->location == "inputs.args.0");
  DOCTEST_CHECK(found->in_root_inputs);
  expect_counts(*found, {1, 1, 0, 8});
  DOCTEST_CHECK(found->message() ==
                "first non-finite: ToyNet (call 1) inputs.args.0: 1 of 8 elements NaN, 1 of 8 elements +Inf, "
                "already in the root's inputs");
  // Found once: the scope keeps it until clear(); then a clean forward finds nothing.
  model(torch::randn({2, 4}));
  DOCTEST_CHECK(sentinel.first()->in_root_inputs);
  sentinel.clear();
  model(torch::randn({2, 4}));
  DOCTEST_CHECK_FALSE(sentinel.first().has_value());
}

DOCTEST_TEST_CASE("sentinel: a NaN made by the root's own code, not by a traced child, names the root") {
  torch::manual_seed(3);
  SelfDividing model;
  const auto out = model(torch::randn({2, 4}));
  auto sentinel = tracetorch::find_nonfinite(model);
  model(torch::randn({2, 4}));
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  // `last` got the Inf as input, so it is not named: the root made it, in its own code.
  DOCTEST_CHECK(found->module_path == "SelfDividing");
  DOCTEST_CHECK(found->location == "outputs.last_hidden_state");
  DOCTEST_CHECK_FALSE(found->in_root_inputs);
  DOCTEST_CHECK(found->elements == out.last_hidden_state.numel());
  DOCTEST_CHECK(found->nan + found->positive_inf + found->negative_inf > 0);
}

DOCTEST_TEST_CASE("sentinel: an input divided by zero in place names that module, saying its entry values went unchecked") {
  torch::manual_seed(2);
  InPlaceNet model;
  const auto x = torch::randn({2, 4});
  const auto h = model->first(x);
  auto sentinel = tracetorch::find_nonfinite(model);
  model(x);
  const auto found = sentinel.first();
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "InPlaceNet.divide");
  DOCTEST_CHECK(found->changed_in_place == std::vector<std::string>{"inputs.args.0"});
  expect_counts(*found, divided_by_zero(h));
  DOCTEST_CHECK(found->message().ends_with("; changed in place by the call, unchecked on entry: inputs.args.0"));
}

DOCTEST_TEST_CASE("sentinel: the debugger option names the call, and the trace is the same with it on or off") {
  auto model = make_toy();
  const auto x = torch::randn({2, 4});
  const auto h = model->first(x);
  model->second_divisor = torch::zeros({4});
  for (const bool use_repr : {true, false}) {
    DOCTEST_CAPTURE(use_repr);
    tracetorch_test::TempDir off, on;
    {
      auto scope = tracetorch::model_addition_debugger(model, {.debug_path = off.path(), .use_repr = use_repr});
      model(x);
      DOCTEST_CHECK_FALSE(scope.first_nonfinite().has_value());  // the option is off
    }
    {
      auto scope = tracetorch::model_addition_debugger(
          model, {.debug_path = on.path(), .use_repr = use_repr, .find_nonfinite = true});
      model(x);
      const auto found = scope.first_nonfinite();
      DOCTEST_REQUIRE(found.has_value());
      DOCTEST_CHECK(found->module_path == "ToyNet.divide");
      DOCTEST_CHECK(found->call == 2);
      expect_counts(*found, divided_by_zero(h));
    }
    const auto written_off = tracetorch_test::snapshot(off.path());
    DOCTEST_CHECK(written_off.size() >= 2);
    DOCTEST_CHECK(written_off == tracetorch_test::snapshot(on.path()));
  }
}

DOCTEST_TEST_CASE("sentinel: a call's find_nonfinite option names the call, and is no keyword of the trace") {
  auto model = make_toy();
  const auto x = torch::randn({2, 4});
  const auto h = model->first(x);
  model->divisor = torch::zeros({4});
  std::optional<tracetorch::NonFinite> found;
  const auto out = model(x, {.find_nonfinite = &found});
  DOCTEST_CHECK_FALSE(torch::isfinite(out.scaled).all().item<bool>());
  DOCTEST_REQUIRE(found.has_value());
  DOCTEST_CHECK(found->module_path == "ToyNet.divide");
  DOCTEST_CHECK(found->call == 1);
  expect_counts(*found, divided_by_zero(h));
  // Nothing stays attached after the call.
  DOCTEST_CHECK(static_cast<tracetorch::detail::TracedModuleBase&>(*model).attachments_.load() == nullptr);
  DOCTEST_CHECK(static_cast<tracetorch::detail::TracedModuleBase&>(*model->divide).attachments_.load() == nullptr);
  tracetorch_test::TempDir with, without;
  {
    auto scope = tracetorch::model_addition_debugger(model, {.debug_path = with.path()});
    model(x, {.find_nonfinite = &found});
  }
  {
    auto scope = tracetorch::model_addition_debugger(model, {.debug_path = without.path()});
    model(x);
  }
  DOCTEST_CHECK(found.has_value());
  DOCTEST_CHECK(tracetorch_test::snapshot(with.path()) == tracetorch_test::snapshot(without.path()));
}

DOCTEST_TEST_CASE("sentinel on the Llama port: a NaN in one weight of layer 1 is named at its module, three ways") {
  auto model = llama_with_nan_weight();
  const auto ids = tracetorch_test::tiny_input_ids();
  {
    auto sentinel = tracetorch::find_nonfinite(model);
    const auto out = model({.input_ids = ids});
    DOCTEST_CHECK(torch::isnan(out.last_hidden_state).any().item<bool>());
    expect_llama_down_proj(sentinel.first(), ids);
  }
  {
    tracetorch_test::TempDir dir;
    auto scope = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .find_nonfinite = true});
    model({.input_ids = ids});
    expect_llama_down_proj(scope.first_nonfinite(), ids);
    DOCTEST_CHECK(std::filesystem::exists(scope.full_tensors_path()));
  }
  std::optional<tracetorch::NonFinite> found;
  model({.input_ids = ids}, {.output_hidden_states = true, .find_nonfinite = &found});
  expect_llama_down_proj(found, ids);
}

DOCTEST_TEST_CASE("sentinel on the Llama port: clean weights find nothing") {
  auto model = tracetorch_test::make_tiny_llama();
  auto sentinel = tracetorch::find_nonfinite(model);
  model({.input_ids = tracetorch_test::tiny_input_ids()});
  DOCTEST_CHECK_FALSE(sentinel.first().has_value());
  DOCTEST_CHECK(sentinel.untraced_modules().empty());
}
