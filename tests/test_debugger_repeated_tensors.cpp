// tracetorch/debugger.hpp's reuse_repeated_tensors (detail/debugger/repeated_tensors.hpp): a tensor
// recorded again, unchanged, is a hard link to the file it was first written to.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using tracetorch_test::inode_of;
using tracetorch_test::make_tiny_llama;
using tracetorch_test::module_paths;
using tracetorch_test::read_json;
using tracetorch_test::TempDir;
using tracetorch_test::tiny_input_ids;

}  // namespace

DOCTEST_TEST_SUITE("debugger") {

DOCTEST_TEST_CASE("reuse_repeated_tensors: the trace is byte for byte the one written without it") {
  auto model = make_tiny_llama();
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    TempDir reused, apart;
    for (const bool reuse : {true, false}) {
      auto guard = tracetorch::model_addition_debugger(
          model, {.debug_path = reuse ? reused.path() : apart.path(), .do_prune_layers = false, .use_repr = use_repr,
                  .reuse_repeated_tensors = reuse});
      model({.input_ids = tiny_input_ids()});
    }
    const auto with = tracetorch_test::snapshot(reused.path()), without = tracetorch_test::snapshot(apart.path());
    DOCTEST_CHECK(with.size() == (use_repr ? 2u : 144u));
    DOCTEST_CHECK(with == without);
    if (!use_repr) {
      // The normed hidden states go to self_attn, q_proj, k_proj and v_proj: one file, five names.
      const auto first = inode_of(reused / "LlamaModel.layers.0.input_layernorm_outputs.safetensors");
      for (const char* name : {"self_attn_inputs_kwargs_hidden_states", "self_attn.q_proj_inputs_args_0", "self_attn.k_proj_inputs_args_0",
                               "self_attn.v_proj_inputs_args_0"}) {
        DOCTEST_INFO(name);
        DOCTEST_CHECK(inode_of(reused / ("LlamaModel.layers.0." + std::string(name) + ".safetensors")) == first);
      }
      DOCTEST_CHECK(inode_of(apart / "LlamaModel.layers.0.self_attn_inputs_kwargs_hidden_states.safetensors") !=
                    inode_of(apart / "LlamaModel.layers.0.input_layernorm_outputs.safetensors"));
    }
  }
}

DOCTEST_TEST_CASE("reuse_repeated_tensors: a tensor written between two calls is recorded again") {
  // Written in place (LibTorch counts it), behind LibTorch's back through data_ptr() (it does
  // not: the content hash sees it), or not at all: only the last is reused.
  struct RewriteImpl : torch::nn::Module {
    RewriteImpl() {
      first = register_module("first", tracetorch::nn::Linear(4, 4));
      second = register_module("second", tracetorch::nn::Tanh());
    }
    torch::Tensor forward(torch::Tensor x) {
      auto y = first(x);
      if (how == 1) y.add_(1);
      if (how == 2) y.data_ptr<float>()[0] = 42;
      return second(y);
    }
    tracetorch::nn::Linear first{nullptr};
    tracetorch::nn::Tanh second{nullptr};
    int how = 0;
  };
  TRACETORCH_TRACEABLE_IMPL(Rewrite, RewriteImpl);
  Rewrite model;
  const auto x = torch::randn({2, 4});
  for (const int how : {0, 1, 2}) {
    DOCTEST_INFO("how " << how);
    model->how = how;
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
      model(x);
    }
    const auto written = dir / "Rewrite.first_outputs.safetensors";
    const auto read = dir / "Rewrite.second_inputs_args_0.safetensors";
    const auto expected = torch::nn::functional::linear(x, model->first->weight, model->first->bias);
    DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(written), expected));
    const auto seen = tracetorch::safetensors::load_single(read);
    if (how == 0) DOCTEST_CHECK(torch::equal(seen, expected));
    if (how == 1) DOCTEST_CHECK(torch::equal(seen, expected + 1));
    if (how == 2) DOCTEST_CHECK(seen[0][0].item<float>() == 42);
    DOCTEST_CHECK((inode_of(read) == inode_of(written)) == (how == 0));
  }
}

DOCTEST_TEST_CASE("reuse_repeated_tensors: the file of a call that failed is not reused") {
  // `failing` is the first to record `y`, then throws; the model catches it and passes `y` on.
  struct ThrowerImpl : torch::nn::Module {
    torch::Tensor forward(torch::Tensor) { throw std::runtime_error("no"); }
  };
  TRACETORCH_TRACEABLE_IMPL(Thrower, ThrowerImpl);
  struct RecoverImpl : torch::nn::Module {
    RecoverImpl() {
      make = register_module("make", tracetorch::nn::Linear(3, 3));
      failing = register_module("failing", Thrower());
      after = register_module("after", tracetorch::nn::Tanh());
    }
    torch::Tensor forward(torch::Tensor x) {
      auto y = x * 2;  // not a module's output: first recorded by `failing`
      try {
        failing(y);
      } catch (const std::runtime_error&) {
      }
      after(y);
      return after(make(x));  // make's output is recorded again: still a hard link
    }
    tracetorch::nn::Linear make{nullptr};
    Thrower failing{nullptr};
    tracetorch::nn::Tanh after{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Recover, RecoverImpl);
  Recover model;
  TempDir dir;
  const auto x = torch::randn({1, 3});
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
    model(x);
  }
  DOCTEST_CHECK(!std::filesystem::exists(dir / "Recover.failing_inputs_args_0.safetensors"));
  DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(dir / "Recover.after_inputs_args_0.safetensors"), x * 2));
  const auto full = read_json(dir / "Recover_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Recover", "Recover.after", "Recover.make", "Recover.after"});
  DOCTEST_CHECK(inode_of(dir / "Recover.after_call2_inputs_args_0.safetensors") == inode_of(dir / "Recover.make_outputs.safetensors"));
}

}  // DOCTEST_TEST_SUITE
