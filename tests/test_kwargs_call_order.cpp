// Keywords recorded in the caller's order, as Python's kwargs dict: output flags given through
// tracetorch::output_options(kwargs), and `**kwargs` handed down to every layer and its
// self_attn through tracetorch::Kwargs. Compared byte for byte with transformers' debugger on the
// same toy (tests/data/call_order/make_call_order.py).

#include <doctest/doctest.h>

#include <tracetorch/tracetorch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "test_helpers.hpp"

namespace callorder {

struct AttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  tracetorch::Keyword<torch::Tensor> attention_mask;
};
TRACETORCH_KEYWORDS(AttentionKeywords, hidden_states, attention_mask);

/// Python's `forward(self, hidden_states=None, attention_mask=None, **kwargs)`.
struct AttentionImpl : torch::nn::Module {
  torch::Tensor forward(const AttentionKeywords& kw, const tracetorch::Kwargs& kwargs = {}) {
    seen_router_logits = kwargs.flag("output_router_logits").value_or(false);
    return *kw.hidden_states * 2.0;
  }
  bool seen_router_logits = false;
};
TRACEABLE(Attention);

struct LayerKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
};
TRACETORCH_KEYWORDS(LayerKeywords, attention_mask);

/// Hands its keyword and its `**kwargs` on to self_attn, as upstream's decoder layers do.
struct LayerImpl : torch::nn::Module {
  LayerImpl() { self_attn = register_module("self_attn", Attention()); }
  torch::Tensor forward(const torch::Tensor& h, const LayerKeywords& kw = {}, const tracetorch::Kwargs& kwargs = {}) {
    return self_attn({.hidden_states = h, .attention_mask = kw.attention_mask}, kwargs) + 1.0;
  }
  Attention self_attn{nullptr};
};
TRACEABLE(Layer);

/// Python's `forward(self, x, output_attentions=None, output_hidden_states=None, use_cache=None,
/// **kwargs)`: the output flags arrive as OutputOptions (in the call's order), the rest of the
/// kwargs are handed to every layer.
struct ToyImpl : torch::nn::Module {
  ToyImpl() {
    layers = register_module("layers", tracetorch::nn::ModuleList());
    for (int i = 0; i < 2; ++i) layers->push_back(Layer());
  }
  torch::Tensor forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    tracetorch::Kwargs handed_on;  // Python's **kwargs: what is not a parameter of this forward
    for (const auto& flag : options.output) handed_on.add("output_" + std::string(flag.key.name()), flag.value);
    auto h = x;
    for (const auto& layer : *layers) h = layer->as<Layer>()->forward(h, {.attention_mask = nullptr}, handed_on);
    return h;
  }
  tracetorch::nn::ModuleList layers{nullptr};
};
TRACEABLE(Toy);

/// The same model with a `**kwargs`-only forward: everything arrives as tracetorch::Kwargs.
namespace as_kwargs {
struct ToyImpl : torch::nn::Module {
  ToyImpl() {
    layers = register_module("layers", tracetorch::nn::ModuleList());
    for (int i = 0; i < 2; ++i) layers->push_back(Layer());
  }
  torch::Tensor forward(const torch::Tensor& x, const tracetorch::Kwargs& kwargs = {}) {
    const auto handed_on = kwargs.without({"output_attentions", "output_hidden_states", "use_cache"});
    auto h = x;
    for (const auto& layer : *layers) h = layer->as<Layer>()->forward(h, {.attention_mask = nullptr}, handed_on);
    return h;
  }
  tracetorch::nn::ModuleList layers{nullptr};
};
TRACEABLE(Toy);
}  // namespace as_kwargs

/// Python's SUMMARY file for `case`.
std::string python_summary(const std::string& name) {
  const auto cases = tracetorch_test::read_json(tracetorch_test::data_dir() / "call_order" / "call_order.json");
  return std::string(cases.at(name).as_string());
}

template <class Model, class Call>
std::string traced_summary(Model& model, const Call& call) {
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    call();
  }
  std::ifstream in(dir.path() / "Toy_debug_tree_SUMMARY.json");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace callorder

DOCTEST_TEST_CASE("call order: output flags are recorded in the caller's order and kwargs handed down, as Python's trace") {
  const auto x = torch::arange(6, torch::kFloat32).reshape({2, 3});
  callorder::Toy toy;
  const auto first = tracetorch::output_options(
      {{"output_attentions", true}, {"output_hidden_states", true}, {"output_router_logits", true}});
  DOCTEST_CHECK(callorder::traced_summary(toy, [&] { toy(x, first); }) == callorder::python_summary("attentions_first"));
  DOCTEST_CHECK(toy->layers[1]->as<callorder::Layer>()->self_attn->seen_router_logits);
  const auto second =
      tracetorch::output_options({{"output_hidden_states", true}, {"use_cache", false}, {"output_attentions", true}});
  DOCTEST_CHECK(callorder::traced_summary(toy, [&] { toy(x, second); }) == callorder::python_summary("hidden_states_first"));

  // Designated initializers can only follow declaration order: output_hidden_states comes first,
  // so Python's first call cannot be written that way.
  const tracetorch::OutputOptions designated{.output_hidden_states = true, .output_attentions = true};
  DOCTEST_CHECK(callorder::traced_summary(toy, [&] { toy(x, designated); }) != callorder::python_summary("attentions_first"));

  callorder::as_kwargs::Toy plain;
  DOCTEST_CHECK(callorder::traced_summary(plain, [&] {
                  plain(x, {{"output_attentions", true}, {"output_hidden_states", true}, {"output_router_logits", true}});
                }) == callorder::python_summary("attentions_first"));
}

DOCTEST_TEST_CASE("call order: output_options refuses what is not an output option, naming it") {
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::output_options({{"output_attentions", 1}}),
                               "tracetorch::output_options: output_attentions must be True or False", tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::output_options({{"attention_mask", nullptr}}),
                               "tracetorch::output_options: attention_mask is not an output option; hand it on in a "
                               "tracetorch::Kwargs",
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(tracetorch::output_options({{"output_hidden_states", true}, {"output_hidden_states", false}}),
                          tracetorch::Error);
  const tracetorch::Kwargs kwargs{{"output_router_logits", true}, {"mode", "eager"}};
  DOCTEST_CHECK(kwargs.flag("output_router_logits") == true);
  DOCTEST_CHECK_FALSE(kwargs.flag("output_attentions").has_value());
  DOCTEST_CHECK_THROWS_AS(kwargs.flag("mode"), tracetorch::Error);
  DOCTEST_CHECK(kwargs.only({"mode"}).entries().size() == 1);
}
