// tracetorch/keywords.hpp: keyword arguments of traced calls, and how C++ values appear in a trace
// (None for nullptr / nullopt / undefined tensors, `tracetorch_repr` objects, pointers).

#include <doctest/doctest.h>
#include <tracetorch/keywords.hpp>
#include <tracetorch/tracetorch.hpp>

#include "test_helpers.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kwtest {

/// An object Python passes by reference and the debugger records by its repr.
struct Cache {
  int layers = 2;
};
std::string tracetorch_repr(const Cache& cache) {
  std::string text = "DynamicCache(layers=[";
  for (int i = 0; i < cache.layers; ++i) text += i == 0 ? "DynamicLayer" : ", DynamicLayer";
  return text + "])";
}

struct BlockKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<const Cache*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<double> scaling = tracetorch::defaults_to(0.5);
};
TRACETORCH_KEYWORDS(BlockKeywords, attention_mask, past_key_values, use_cache, scaling);

struct BlockImpl : torch::nn::Module {
  /// Returns what the body saw, so tests can check defaults and None.
  torch::Tensor forward(const torch::Tensor& h, const BlockKeywords& kw = {}) {
    seen_use_cache = *kw.use_cache;
    seen_scaling = kw.scaling.value();
    seen_mask_none = kw.attention_mask.is_none();
    seen_cache = kw.past_key_values.value();
    return kw.attention_mask.has_value() && kw.attention_mask->defined() ? h + *kw.attention_mask : h * kw.scaling.value();
  }
  bool seen_use_cache = true;
  double seen_scaling = 0;
  bool seen_mask_none = false;
  const Cache* seen_cache = nullptr;
};
TRACEABLE(Block);

/// Keywords only, as Python's `self_attn(hidden_states=h, ...)`.
struct AttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  tracetorch::Keyword<std::string> mode;
};
TRACETORCH_KEYWORDS(AttentionKeywords, hidden_states, mode);

struct AttentionImpl : torch::nn::Module {
  torch::Tensor forward(const AttentionKeywords& kw) { return kw.hidden_states->relu(); }
};
TRACEABLE(Attention);

/// A positional argument that may be None, and a shared object.
struct HeadImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& head_mask, std::shared_ptr<Cache> cache) {
    return head_mask.defined() ? h * head_mask : h + (cache ? cache->layers : 0);
  }
};
TRACEABLE(Head);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    block = register_module("block", Block());
    attn = register_module("attn", Attention());
    head = register_module("head", Head());
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = block(x, {.attention_mask = torch::ones_like(x), .past_key_values = &cache, .use_cache = true});
    h = block(h);
    h = block(h, {.attention_mask = nullptr, .past_key_values = nullptr});
    h = attn({.hidden_states = h, .mode = "eager"});
    return head(h, torch::Tensor(), nullptr);
  }
  Cache cache;
  Block block{nullptr};
  Attention attn{nullptr};
  Head head{nullptr};
};
TRACEABLE(Net);

/// Handing keywords on, as Python's `**kwargs` (`.x = kw.x`) and as `f(x=x)` (`.x = kw.x.or_none()`).
struct TowerKeywords {
  tracetorch::Keyword<std::int64_t> vision_feature_layer;
  tracetorch::Keyword<std::string> vision_feature_select_strategy;
};
TRACETORCH_KEYWORDS(TowerKeywords, vision_feature_layer, vision_feature_select_strategy);

struct TowerImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& h, const TowerKeywords& kw = {}) {
    seen_layer = kw.vision_feature_layer.or_none();
    seen_strategy = kw.vision_feature_select_strategy.or_none();
    seen_passed = kw.vision_feature_layer.passed();
    return h * static_cast<double>(kw.vision_feature_layer.value_or(-2));
  }
  std::optional<std::int64_t> seen_layer;
  std::optional<std::string> seen_strategy;
  bool seen_passed = false;
};
TRACEABLE(Tower);

struct HandOnImpl : torch::nn::Module {
  HandOnImpl() { tower = register_module("tower", Tower()); }
  torch::Tensor forward(const torch::Tensor& h, const TowerKeywords& kw = {}) {
    if (explicitly) {
      return tower(h, {.vision_feature_layer = kw.vision_feature_layer.or_none(),
                       .vision_feature_select_strategy = kw.vision_feature_select_strategy.or_none()});
    }
    return tower(h, {.vision_feature_layer = kw.vision_feature_layer,
                     .vision_feature_select_strategy = kw.vision_feature_select_strategy});
  }
  bool explicitly = false;
  Tower tower{nullptr};
};
TRACEABLE(HandOn);

/// Keywords only, the block's own handed on after hidden_states: Python's
/// `self_attn(hidden_states=h, attention_mask=attention_mask, ...)` inside a block.
struct BlockAttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  BlockKeywords block;
};
TRACETORCH_KEYWORDS(BlockAttentionKeywords, hidden_states, block);

struct BlockAttentionImpl : torch::nn::Module {
  torch::Tensor forward(const BlockAttentionKeywords& kw) { return *kw.hidden_states * kw.block.scaling.value(); }
};
TRACEABLE(BlockAttention);

}  // namespace kwtest

namespace {

using tracetorch_test::read_json;
using tracetorch_test::TempDir;

boost::json::value trace_of(kwtest::Net& net, const torch::Tensor& x, const TempDir& dir) {
  {
    auto guard = tracetorch::model_addition_debugger(net, {.debug_path = dir.path(), .do_prune_layers = false});
    net(x);
  }
  return read_json(dir.path() / "Net_debug_tree_SUMMARY.json");
}

std::vector<std::string> keys_of(const boost::json::value& object) {
  std::vector<std::string> keys;
  for (const auto& entry : object.as_object()) keys.emplace_back(entry.key());
  return keys;
}

}  // namespace

DOCTEST_TEST_SUITE("keywords") {
  DOCTEST_TEST_CASE("a Keyword knows whether it was passed, and whether as None") {
    const kwtest::BlockKeywords none_passed{};
    DOCTEST_CHECK_FALSE(none_passed.attention_mask.passed());
    DOCTEST_CHECK_FALSE(none_passed.use_cache.passed());
    DOCTEST_CHECK_FALSE(*none_passed.use_cache);
    DOCTEST_CHECK(none_passed.scaling.value() == 0.5);

    const kwtest::BlockKeywords some{.attention_mask = nullptr, .use_cache = true};
    DOCTEST_CHECK(some.attention_mask.passed());
    DOCTEST_CHECK(some.attention_mask.is_none());
    DOCTEST_CHECK_FALSE(some.attention_mask->defined());
    DOCTEST_CHECK(some.use_cache.passed());
    DOCTEST_CHECK(*some.use_cache);
    DOCTEST_CHECK_FALSE(some.past_key_values.passed());

    const std::optional<torch::Tensor> empty;
    const kwtest::BlockKeywords from_optional{.attention_mask = empty, .past_key_values = std::nullopt};
    DOCTEST_CHECK(from_optional.attention_mask.passed());
    DOCTEST_CHECK(from_optional.attention_mask.is_none());
    DOCTEST_CHECK(from_optional.past_key_values.is_none());
    DOCTEST_CHECK(from_optional.past_key_values.value_or(nullptr) == nullptr);
  }

  DOCTEST_TEST_CASE("calls read like Python and trace exactly the keywords passed, in the call's order") {
    kwtest::Net net;
    TempDir dir;
    const auto trace = trace_of(net, torch::randn({2, 3}), dir);
    const auto& children = trace.at("children").as_array();
    DOCTEST_REQUIRE(children.size() == 5);

    // block(x, {.attention_mask = m, .past_key_values = &cache, .use_cache = true})
    const auto& first = children[0].at("inputs").as_object();
    DOCTEST_CHECK(keys_of(first) == std::vector<std::string>{"args", "kwargs"});
    DOCTEST_CHECK(keys_of(first.at("kwargs")) == std::vector<std::string>{"attention_mask", "past_key_values", "use_cache"});
    DOCTEST_CHECK(first.at("kwargs").at("past_key_values") == "DynamicCache(layers=[DynamicLayer, DynamicLayer])");
    DOCTEST_CHECK(first.at("kwargs").at("use_cache") == "True");
    DOCTEST_CHECK(first.at("kwargs").at("attention_mask").at("shape") == "torch.Size([2, 3])");

    // block(h): defaults apply and nothing is recorded as a keyword
    const auto& second = children[1].at("inputs").as_object();
    DOCTEST_CHECK(keys_of(second) == std::vector<std::string>{"args"});
    DOCTEST_CHECK_FALSE(net->block->seen_use_cache == true);  // last call below saw the default too

    // block(h, {.attention_mask = nullptr, .past_key_values = nullptr}): None, not a crash
    const auto& third = children[2].at("inputs").at("kwargs");
    DOCTEST_CHECK(keys_of(third) == std::vector<std::string>{"attention_mask", "past_key_values"});
    DOCTEST_CHECK(third.at("attention_mask") == "None");
    DOCTEST_CHECK(third.at("past_key_values") == "None");
    DOCTEST_CHECK(net->block->seen_mask_none);
    DOCTEST_CHECK(net->block->seen_cache == nullptr);
    DOCTEST_CHECK(net->block->seen_scaling == 0.5);

    // attn({.hidden_states = h, .mode = "eager"}): keywords only, so no "args" key (Python drops it)
    const auto& fourth = children[3].at("inputs").as_object();
    DOCTEST_CHECK(keys_of(fourth) == std::vector<std::string>{"kwargs"});
    DOCTEST_CHECK(fourth.at("kwargs").at("mode") == "'eager'");

    // head(h, torch::Tensor(), nullptr): positional None twice
    const auto& fifth = children[4].at("inputs").at("args").as_array();
    DOCTEST_REQUIRE(fifth.size() == 3);
    DOCTEST_CHECK(fifth[1] == "None");
    DOCTEST_CHECK(fifth[2] == "None");
  }

  DOCTEST_TEST_CASE("a mutable keyword struct visits every field, in order, as the field itself") {
    kwtest::BlockKeywords kw{.past_key_values = nullptr};
    std::vector<std::string> names;
    std::vector<bool> passed;
    tracetorch_keywords(kw, [&](std::string_view name, auto& field) {
      names.emplace_back(name);
      passed.push_back(field.passed());
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, tracetorch::Keyword<bool>>) {
        field = true;  // set by name: now passed
      }
    });
    DOCTEST_CHECK(names == std::vector<std::string>{"attention_mask", "past_key_values", "use_cache", "scaling"});
    DOCTEST_CHECK(passed == std::vector<bool>{false, true, false, false});
    DOCTEST_CHECK(kw.use_cache.passed());
    DOCTEST_CHECK(*kw.use_cache);

    // The const overload still visits only what was passed, unwrapped.
    std::vector<std::string> recorded;
    const auto& as_const = kw;
    tracetorch_keywords(as_const, [&](std::string_view name, const auto&) { recorded.emplace_back(name); });
    DOCTEST_CHECK(recorded == std::vector<std::string>{"past_key_values", "use_cache"});
  }

  DOCTEST_TEST_CASE("a keyword struct held as a field records its keywords in its place, and is set by their names") {
    kwtest::BlockAttention attention;
    const auto x = torch::ones({2});
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(attention, {.debug_path = dir.path(), .do_prune_layers = false});
      attention({.hidden_states = x, .block = {.past_key_values = nullptr, .scaling = 2.0}});
    }
    const auto trace = read_json(dir.path() / "BlockAttention_debug_tree_SUMMARY.json");
    const auto& kwargs = trace.at("inputs").at("kwargs");
    // What was passed, in order, under the inner names; use_cache, not passed, is left out.
    DOCTEST_CHECK(keys_of(kwargs) == std::vector<std::string>{"hidden_states", "past_key_values", "scaling"});
    DOCTEST_CHECK(kwargs.at("past_key_values") == "None");
    DOCTEST_CHECK(kwargs.at("scaling") == "2.0");

    // The mutable walk flattens too: what --call and replay use to set a keyword by name.
    kwtest::BlockAttentionKeywords kw;
    std::vector<std::string> names;
    tracetorch_keywords(kw, [&](std::string_view name, auto& field) {
      names.emplace_back(name);
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, tracetorch::Keyword<bool>>) field = true;
    });
    DOCTEST_CHECK(names ==
                  std::vector<std::string>{"hidden_states", "attention_mask", "past_key_values", "use_cache", "scaling"});
    DOCTEST_CHECK(kw.block.use_cache.passed());
    DOCTEST_CHECK(tracetorch::detail::keyword_struct<kwtest::BlockKeywords>);
    DOCTEST_CHECK_FALSE(tracetorch::detail::keyword_struct<tracetorch::Keyword<bool>>);
  }

  DOCTEST_TEST_CASE("a keyword handed on keeps not passed and None, for an int and a string as for a tensor") {
    kwtest::HandOn outer;
    const auto x = torch::ones({2});
    const auto tower_kwargs = [&](const kwtest::TowerKeywords& kw) {
      TempDir dir;
      {
        auto guard = tracetorch::model_addition_debugger(outer, {.debug_path = dir.path(), .do_prune_layers = false});
        outer(x, kw);
      }
      const auto trace = read_json(dir.path() / "HandOn_debug_tree_SUMMARY.json");
      const auto& inputs = trace.at("children").as_array().at(0).at("inputs").as_object();
      return inputs.contains("kwargs") ? keys_of(inputs.at("kwargs")) : std::vector<std::string>{};
    };

    // **kwargs: not passed stays not passed, and reads as None below.
    DOCTEST_CHECK(tower_kwargs({}).empty());
    DOCTEST_CHECK_FALSE(outer->tower->seen_passed);
    DOCTEST_CHECK_FALSE(outer->tower->seen_layer.has_value());
    DOCTEST_CHECK_FALSE(outer->tower->seen_strategy.has_value());
    // passed as None stays None; a value stays the value.
    DOCTEST_CHECK(tower_kwargs({.vision_feature_layer = nullptr, .vision_feature_select_strategy = "full"}) ==
                  std::vector<std::string>{"vision_feature_layer", "vision_feature_select_strategy"});
    DOCTEST_CHECK(outer->tower->seen_passed);
    DOCTEST_CHECK_FALSE(outer->tower->seen_layer.has_value());
    DOCTEST_CHECK(outer->tower->seen_strategy == "full");

    // x=x: always passed, None where the outer call had no value.
    outer->explicitly = true;
    DOCTEST_CHECK(tower_kwargs({}) == std::vector<std::string>{"vision_feature_layer", "vision_feature_select_strategy"});
    DOCTEST_CHECK(outer->tower->seen_passed);
    DOCTEST_CHECK_FALSE(outer->tower->seen_layer.has_value());
    DOCTEST_CHECK_FALSE(outer->tower->seen_strategy.has_value());

    // pass_each: x=x for every field at once, the same as or_none() field by field.
    const auto each = tracetorch::pass_each(kwtest::BlockKeywords{.past_key_values = nullptr});
    DOCTEST_CHECK(each.attention_mask.is_none());
    DOCTEST_CHECK(each.past_key_values.is_none());
    DOCTEST_CHECK(each.use_cache.passed());
    DOCTEST_CHECK_FALSE(*each.use_cache);  // its default, now passed
    DOCTEST_CHECK(each.scaling.passed());
    DOCTEST_CHECK(each.scaling.value() == 0.5);
    const auto nested = tracetorch::pass_each(kwtest::BlockAttentionKeywords{.block = {.use_cache = true}});
    DOCTEST_CHECK(nested.hidden_states.is_none());
    DOCTEST_CHECK(nested.block.attention_mask.is_none());
    DOCTEST_CHECK(*nested.block.use_cache);

    // A keyword handed on to a keyword of another, convertible type keeps its state too.
    const tracetorch::Keyword<std::int64_t> unpassed;
    const tracetorch::Keyword<double> widened = unpassed;
    DOCTEST_CHECK_FALSE(widened.passed());
    DOCTEST_CHECK_FALSE(widened.has_value());
    const tracetorch::Keyword<std::int64_t> none = nullptr;
    DOCTEST_CHECK(tracetorch::Keyword<double>(none).is_none());
  }

  DOCTEST_TEST_CASE("the body sees passed values and defaults") {
    kwtest::Block block;
    const auto x = torch::ones({2});
    DOCTEST_CHECK(torch::equal(block(x), x * 0.5));
    DOCTEST_CHECK_FALSE(block->seen_use_cache);
    DOCTEST_CHECK(torch::equal(block(x, {.attention_mask = x, .use_cache = true}), x + x));
    DOCTEST_CHECK(block->seen_use_cache);
    DOCTEST_CHECK(torch::equal(block->forward(x, {.scaling = 2.0}), x * 2.0));
  }

  DOCTEST_TEST_CASE("a value without tracetorch_repr keeps Python's default repr, address sanitised") {
    struct Plain {};
    struct Visitor final : tracetorch::detail::ValueVisitor {
      std::string seen;
      void none() override { seen = "None"; }
      void boolean(bool) override {}
      void integer(std::int64_t) override {}
      void floating(double) override {}
      void string(std::string_view) override {}
      void dtype(c10::ScalarType) override {}
      void tensor(const torch::Tensor&) override {}
      void repr(std::string_view text) override { seen = text; }
      void begin_sequence() override {}
      void begin_mapping() override {}
      void element(std::size_t) override {}
      void entry(std::string_view) override {}
      void end() override {}
    } visitor;
    tracetorch::detail::visit_value(Plain{}, visitor);
    DOCTEST_CHECK(visitor.seen.find(" object at 0xXXXXXXXX>") != std::string::npos);
    tracetorch::detail::visit_value(kwtest::Cache{3}, visitor);
    DOCTEST_CHECK(visitor.seen == "DynamicCache(layers=[DynamicLayer, DynamicLayer, DynamicLayer])");
    tracetorch::detail::visit_value(std::shared_ptr<kwtest::Cache>(), visitor);
    DOCTEST_CHECK(visitor.seen == "None");
    const kwtest::Cache one{1};
    tracetorch::detail::visit_value(&one, visitor);
    DOCTEST_CHECK(visitor.seen == "DynamicCache(layers=[DynamicLayer])");
  }
}
