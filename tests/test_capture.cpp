// tracetorch/capture.hpp: record maps, capture_outputs, to_tuple, merge_with_config_defaults,
// the patch mapping; on toy models, the Llama fixture and the BERT-style cross-attention model.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <atomic>
#include <thread>

#include "bert/bert.hpp"
#include "llama/llama.hpp"
#include "test_helpers.hpp"

namespace {

using tracetorch_test::tiny_llama_dir;

struct ToyLayerImpl : torch::nn::Module {
  explicit ToyLayerImpl(std::int64_t width) { linear = register_module("linear", tracetorch::nn::Linear(width, width)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(linear(x)); }
  tracetorch::nn::Linear linear{nullptr};
};
TRACEABLE(ToyLayer);

/// Returns (x * 2, weights), or no weights at all (None in Python) when `with_weights` is off.
struct ToyAttnImpl : torch::nn::Module {
  explicit ToyAttnImpl(bool with_weights = true) : with_weights(with_weights) {}
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) {
    return {x * 2, with_weights ? torch::softmax(x, -1) : torch::Tensor()};
  }
  bool with_weights;
};
TRACEABLE(ToyAttn);

/// A drop-in replacement of ToyAttn (as a fused kernel would be), registered at run time.
struct FusedToyAttnImpl : ToyAttnImpl {
  using ToyAttnImpl::ToyAttnImpl;
};
TRACEABLE(FusedToyAttn);

/// Another replacement, known at compile time.
struct StaticToyAttnImpl : ToyAttnImpl {
  using ToyAttnImpl::ToyAttnImpl;
};
TRACEABLE(StaticToyAttn);

}  // namespace

template <>
struct tracetorch::replacements<ToyAttn> {
  using types = std::tuple<StaticToyAttn>;
};

namespace {

struct ToyOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(ToyOutput, last_hidden_state, hidden_states, attentions);

struct ToyConfig {
  std::optional<bool> output_hidden_states;
  bool output_attentions = false;
  bool use_cache = true;
};

/// Layers of (Attn, ToyLayer); last_hidden_state is the last layer's output times 10, which
/// stands for a final norm.
template <class Attn>
struct ToyModelTImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"hidden_states", ToyLayer>(),
                                 tracetorch::record<&ToyOutput::attentions, ToyAttn>());

  ToyModelTImpl(int layers, std::int64_t width, bool with_weights = true) {
    attn = register_module("attn", torch::nn::ModuleList());
    block = register_module("block", torch::nn::ModuleList());
    for (int i = 0; i < layers; ++i) {
      attn->push_back(Attn(with_weights));
      block->push_back(ToyLayer(width));
    }
  }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(
        *this, options,
        [&] {
          if (probe) probe(*this);
          auto h = x;
          for (std::size_t i = 0; i < block->size(); ++i) {
            h = std::get<0>(attn[i]->template as<Attn>()->forward(h));
            h = block[i]->as<ToyLayer>()->forward(h);
          }
          return ToyOutput{.last_hidden_state = h * 10};
        },
        settings);
  }

  ToyConfig config;
  tracetorch::CaptureSettings settings;
  std::function<void(ToyModelTImpl&)> probe;
  torch::nn::ModuleList attn{nullptr}, block{nullptr};
};
TRACETORCH_TRACEABLE_IMPL(ToyModel, ToyModelTImpl<ToyAttn>);
TRACETORCH_TRACEABLE_IMPL(FusedToyModel, ToyModelTImpl<FusedToyAttn>);
TRACETORCH_TRACEABLE_IMPL(StaticToyModel, ToyModelTImpl<StaticToyAttn>);

/// A model around a ToyModel: both capture; each gets its own collection.
struct WrapperImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(tracetorch::record<"attentions", ToyAttn>());
  WrapperImpl() {
    inner = register_module("inner", ToyModel(2, 4));
    own = register_module("own", ToyAttn());
  }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      inner_output = inner->forward(x, options);
      return ToyOutput{.last_hidden_state = std::get<0>(own->forward(inner_output.last_hidden_state))};
    });
  }
  ToyOutput inner_output;
  ToyModel inner{nullptr};
  ToyAttn own{nullptr};
};
TRACEABLE(Wrapper);

/// Attention that is not a ToyAttn (no common base): a replacement only patching makes recorded.
struct OtherAttnImpl : torch::nn::Module {
  explicit OtherAttnImpl(bool = true) {}
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) { return {x * 2, torch::softmax(x, -1)}; }
};
TRACEABLE(OtherAttn);
TRACETORCH_TRACEABLE_IMPL(OtherToyModel, ToyModelTImpl<OtherAttn>);

struct VisionToyOutput {
  torch::Tensor last_hidden_state;
  torch::Tensor vision_hidden_states;
  std::optional<std::vector<torch::Tensor>> hidden_states;
};
TRACETORCH_OUTPUT(VisionToyOutput, last_hidden_state, vision_hidden_states, hidden_states);

struct VisionToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(tracetorch::record<"hidden_states", ToyLayer>());
  VisionToyImpl() {
    first = register_module("first", ToyLayer(4));
    second = register_module("second", ToyLayer(4));
  }
  VisionToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      const auto h = second(first(x));
      return VisionToyOutput{.last_hidden_state = h * 10, .vision_hidden_states = h * 3};
    });
  }
  ToyLayer first{nullptr}, second{nullptr};
};
TRACEABLE(VisionToy);

struct SelfCrossOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> cross_attentions;
};
TRACETORCH_OUTPUT(SelfCrossOutput, last_hidden_state, attentions, cross_attentions);

/// Two blocks of (self_attn, cross_attn); one record lists both recorders, as some upstream
/// models do, and capture splits the list.
struct SelfCrossToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"attentions", tracetorch::OutputRecorder<ToyAttn, 1, ".self_attn">,
                         tracetorch::OutputRecorder<ToyAttn, 1, ".cross_attn">>());
  SelfCrossToyImpl() {
    for (int i = 0; i < 2; ++i) {
      self_attn.push_back(register_module("self_attn" + std::to_string(i), ToyAttn()));
      cross_attn.push_back(register_module("cross_attn" + std::to_string(i), ToyAttn()));
    }
  }
  SelfCrossOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      self_weights.clear();
      cross_weights.clear();
      auto h = x;
      for (std::size_t i = 0; i < 2; ++i) {
        auto [a, wa] = self_attn[i](h);
        self_weights.push_back(wa);
        auto [c, wc] = cross_attn[i](a + 1);
        cross_weights.push_back(wc);
        h = c;
      }
      return SelfCrossOutput{.last_hidden_state = h};
    });
  }
  std::vector<ToyAttn> self_attn, cross_attn;
  std::vector<torch::Tensor> self_weights, cross_weights;
};
TRACEABLE(SelfCrossToy);

/// Returns (x, weights or None) with the weights as std::optional.
struct OptAttnImpl : torch::nn::Module {
  std::tuple<torch::Tensor, std::optional<torch::Tensor>> forward(const torch::Tensor& x, bool with_weights) {
    return {x, with_weights ? std::optional(torch::softmax(x, -1)) : std::nullopt};
  }
};
TRACEABLE(OptAttn);

struct IndexToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"attentions", tracetorch::OutputRecorder<ToyAttn, 0, ".attn">, ToyLayer, OptAttn>(),
      tracetorch::record<"cross_attentions", tracetorch::OutputRecorder<ToyAttn, -1, ".last">>());
  IndexToyImpl() {
    attn = register_module("attn", ToyAttn());
    layer = register_module("layer", ToyLayer(4));
    opt = register_module("opt", OptAttn());
    last = register_module("last", ToyAttn());
  }
  SelfCrossOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      attn(x);
      layer_output = layer(x);
      opt(x, true);
      opt(x, false);
      last(x);
      return SelfCrossOutput{.last_hidden_state = x};
    });
  }
  ToyAttn attn{nullptr}, last{nullptr};
  ToyLayer layer{nullptr};
  OptAttn opt{nullptr};
  torch::Tensor layer_output;
};
TRACEABLE(IndexToy);

/// Calls its layer through its Impl, which bypasses tracing: nothing can be captured.
struct ImplCallingToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(tracetorch::record<"hidden_states", ToyLayer>());
  ImplCallingToyImpl() { layer = register_module("layer", ToyLayer(4)); }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      return ToyOutput{.last_hidden_state = static_cast<ToyLayerImpl&>(*layer).forward(x)};
    });
  }
  ToyLayer layer{nullptr};
};
TRACEABLE(ImplCallingToy);

struct OrderToyOutput {
  std::optional<std::vector<torch::Tensor>> attentions;
  torch::Tensor last_hidden_state;
  torch::Tensor pooler_output;
};
TRACETORCH_OUTPUT(OrderToyOutput, attentions, last_hidden_state, pooler_output);

/// Declares a captured field before its own ones; its config says return_dict=False.
struct OrderToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(tracetorch::record<"attentions", ToyAttn>());
  OrderToyImpl() { attn = register_module("attn", ToyAttn()); }
  OrderToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      const auto h = std::get<0>(attn(x));
      return OrderToyOutput{.last_hidden_state = h, .pooler_output = h.sum()};
    });
  }
  struct {
    bool return_dict = false;
  } config;
  ToyAttn attn{nullptr};
};
TRACEABLE(OrderToy);

/// The values every layer computes, recomputed by hand: [input, layer outputs...].
std::vector<torch::Tensor> manual_hidden_states(ToyModel& model, const torch::Tensor& x) {
  std::vector<torch::Tensor> states{x * 2};
  auto h = x;
  for (std::size_t i = 0; i < model->block->size(); ++i) {
    h = h * 2;
    h = torch::tanh(model->block[i]->as<ToyLayer>()->linear->forward(h));
    states.push_back(h);
  }
  return states;
}

bool same(const torch::Tensor& a, const torch::Tensor& b) { return a.defined() && b.defined() && torch::allclose(a, b); }

/// Registers keys for one test and removes whatever is left of them at the end.
struct PatchKeys {
  std::vector<std::string> keys;
  ~PatchKeys() {
    for (const auto& key : keys) {
      try {
        tracetorch::unregister_patch_mapping({key});
      } catch (const tracetorch::Error&) {
      }
    }
  }
};

}  // namespace

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("hidden_states start with the first layer's input and end with last_hidden_state") {
  torch::manual_seed(1);
  ToyModel model(3, 4);
  const auto x = torch::randn({2, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  const auto expected = manual_hidden_states(model, x);
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  DOCTEST_REQUIRE(out.hidden_states->size() == 4);  // layers + 1
  DOCTEST_CHECK(same((*out.hidden_states)[0], expected[0]));  // the input of the first recorded layer
  DOCTEST_CHECK(same((*out.hidden_states)[1], expected[1]));
  DOCTEST_CHECK(same((*out.hidden_states)[2], expected[2]));
  DOCTEST_CHECK(same((*out.hidden_states)[3], out.last_hidden_state));  // tied to the final, "normed" state
  DOCTEST_CHECK_FALSE(out.attentions.has_value());                      // not asked for: None

  model->settings.tie_last_hidden_states = false;
  const auto untied = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_CHECK(same((*untied.hidden_states)[3], expected[3]));
}

DOCTEST_TEST_CASE("attentions take element 1 of each attention call; None weights are skipped") {
  torch::manual_seed(2);
  ToyModel model(2, 4);
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_CHECK(same((*out.attentions)[0], torch::softmax(x, -1)));
  DOCTEST_CHECK_FALSE(out.hidden_states.has_value());

  ToyModel without_weights(2, 4, /*with_weights=*/false);
  const auto none = without_weights(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(none.attentions.has_value());
  DOCTEST_CHECK(none.attentions->empty());
}

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

DOCTEST_TEST_CASE("nothing requested: nothing is attached while the forward runs") {
  ToyModel model(2, 4);
  int attached_during_forward = -1;
  model->probe = [&](ToyModelTImpl<ToyAttn>& self) {
    attached_during_forward = 0;
    for (const auto& module : self.modules(/*include_self=*/false)) {
      if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
        attached_during_forward += traced->attachments_.load() != nullptr ? 1 : 0;
      }
    }
  };
  model(torch::randn({1, 4}));
  DOCTEST_CHECK(attached_during_forward == 0);
  model(torch::randn({1, 4}), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_CHECK(attached_during_forward == 2);  // the two attention modules, nothing else
  // And afterwards nothing is left attached.
  model->probe = nullptr;
  for (const auto& module : model->modules()) {
    if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      DOCTEST_CHECK(traced->attachments_.load() == nullptr);
    }
  }
}

DOCTEST_TEST_CASE("sparse hidden_states: full length, undefined where not requested") {
  torch::manual_seed(3);
  ToyModel model(4, 4);
  const auto x = torch::randn({2, 4});
  const auto all = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  const auto some = model(x, tracetorch::OutputOptions{.output_hidden_states = tracetorch::layers{1, 3}});
  DOCTEST_REQUIRE(some.hidden_states->size() == all.hidden_states->size());
  for (std::size_t i = 0; i < all.hidden_states->size(); ++i) {
    DOCTEST_INFO("position ", i);
    if (i == 1 || i == 3) {
      DOCTEST_CHECK(same((*some.hidden_states)[i], (*all.hidden_states)[i]));
    } else {
      DOCTEST_CHECK_FALSE((*some.hidden_states)[i].defined());
    }
  }
  const auto last = model(x, tracetorch::OutputOptions{.output_hidden_states = tracetorch::layers{4}});
  DOCTEST_CHECK(same(last.hidden_states->back(), last.last_hidden_state));
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::LayerSelection(tracetorch::layers{-1}),
                               doctest::Contains("negative"), tracetorch::Error);
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

DOCTEST_TEST_CASE("merge_with_config_defaults takes use_cache from the config unless given") {
  ToyModel model(1, 4);
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {}).use_cache == true);
  model->config.use_cache = false;
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {}).use_cache == false);
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {.use_cache = true}).use_cache == true);
}

DOCTEST_TEST_CASE("two threads capturing two models each get their own values") {
  torch::manual_seed(4);
  ToyModel first(3, 8), second(3, 8);
  const auto x1 = torch::randn({2, 8});
  const auto x2 = torch::randn({2, 8});
  const auto expected1 = manual_hidden_states(first, x1);
  const auto expected2 = manual_hidden_states(second, x2);
  std::atomic<int> wrong{0};
  const auto run = [&](ToyModel& model, const torch::Tensor& x, const std::vector<torch::Tensor>& expected) {
    for (int i = 0; i < 30; ++i) {
      const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
      if (out.hidden_states->size() != 4 || out.attentions->size() != 3 || !same((*out.hidden_states)[1], expected[1]) ||
          !same((*out.hidden_states)[2], expected[2])) {
        ++wrong;
      }
    }
  };
  std::thread a(run, std::ref(first), x1, expected1);
  std::thread b(run, std::ref(second), x2, expected2);
  a.join();
  b.join();
  DOCTEST_CHECK(wrong.load() == 0);
}

DOCTEST_TEST_CASE("one model shared by a capturing thread and a plain one: each call sees only its own") {
  // Each capturing call attaches to the layers and frees its attachments when it returns, while
  // the other thread's calls walk the same modules' lists (run under ASan in CI).
  torch::manual_seed(5);
  ToyModel model(3, 8);
  const auto x = torch::randn({2, 8});
  const auto expected = manual_hidden_states(model, x);
  const auto plain_expected = model(x).last_hidden_state;
  std::atomic<int> wrong{0};
  std::thread capturing([&] {
    for (int i = 0; i < 300; ++i) {
      const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
      if (!out.hidden_states || out.hidden_states->size() != 4 || !out.attentions || out.attentions->size() != 3 ||
          !same((*out.hidden_states)[1], expected[1]) || !same((*out.hidden_states)[2], expected[2])) {
        ++wrong;
      }
    }
  });
  std::thread plain([&] {
    for (int i = 0; i < 300; ++i) {
      const auto out = model(x);
      if (out.hidden_states.has_value() || out.attentions.has_value() || !same(out.last_hidden_state, plain_expected)) {
        ++wrong;
      }
    }
  });
  capturing.join();
  plain.join();
  DOCTEST_CHECK(wrong.load() == 0);
}

DOCTEST_TEST_CASE("nested models each collect their own values") {
  Wrapper wrapper;
  const auto out = wrapper(torch::randn({1, 4}), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(wrapper->inner_output.attentions.has_value());
  DOCTEST_CHECK(wrapper->inner_output.attentions->size() == 2);  // the inner model's own two
  DOCTEST_REQUIRE(out.attentions.has_value());
  // Upstream's recorders stop at a sub-model that captures for itself: the outer one sees its own only.
  DOCTEST_REQUIRE(out.attentions->size() == 1);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], torch::softmax(wrapper->inner_output.last_hidden_state, -1)));
}

DOCTEST_TEST_CASE("patch mapping: exact names first, then patterns in registration order") {
  PatchKeys cleanup{{"^Llama\\d+Attention$", ".*Attention$", "FooAttention", "Other"}};
  tracetorch::register_patch_mapping({{"^Llama\\d+Attention$", tracetorch::replacement<FusedToyAttn>()},
                                      {".*Attention$", tracetorch::replacement<StaticToyAttn>()}});
  tracetorch::register_patch_mapping({{"FooAttention", tracetorch::replacement<ToyLayer>()}});
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama2Attention")->name == "FusedToyAttn");
  DOCTEST_CHECK(tracetorch::find_patch_replacement("MistralAttention")->name == "StaticToyAttn");
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention")->name == "ToyLayer");  // exact beats pattern
  DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("Llama2Mlp").has_value());
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama2AttentionX").has_value() == false);

  // Twice without overwrite: an error, and nothing of that call is registered.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"Other", tracetorch::replacement<ToyLayer>()},
                                                                   {"FooAttention", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("already registered"), tracetorch::Error);
  DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("Other").has_value());
  // With overwrite the key keeps its place and takes the new value.
  tracetorch::register_patch_mapping({{"^Llama\\d+Attention$", tracetorch::replacement<ToyLayer>()}}, /*overwrite=*/true);
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama3Attention")->name == "ToyLayer");

  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"(unclosed", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("not a valid pattern"), tracetorch::Error);
  // Keys in Python's syntax, as upstream writes them: inline flags, named groups. Lookaround,
  // which RE2 does not have, is refused at registration.
  {
    PatchKeys python_keys{{"(?i)^toy", "(?P<family>Mistral)Mlp$"}};
    tracetorch::register_patch_mapping({{"(?i)^toy", tracetorch::replacement<FusedToyAttn>()},
                                        {"(?P<family>Mistral)Mlp$", tracetorch::replacement<ToyLayer>()}});
    DOCTEST_CHECK(tracetorch::find_patch_replacement("TOYBlock")->name == "FusedToyAttn");
    DOCTEST_CHECK(tracetorch::find_patch_replacement("MistralMlp")->name == "ToyLayer");
    DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("MistralMlpX").has_value());
  }
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"Llama(?=Attention)", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("not a valid pattern"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::unregister_patch_mapping({"FooAttention", "NeverRegistered"}),
                               doctest::Contains("NeverRegistered"), tracetorch::Error);
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention").has_value());  // nothing removed
  tracetorch::unregister_patch_mapping({"FooAttention"});
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention")->name == "StaticToyAttn");  // now the pattern
}

DOCTEST_TEST_CASE("patch_output_recorders: the replacement alone is recorded, and only once it was called") {
  const auto x = torch::randn({1, 4});
  const tracetorch::OutputOptions attentions{.output_attentions = true};
  OtherToyModel other(2, 4);  // its attention modules are OtherAttn, not ToyAttn
  ToyModel original(2, 4);
  DOCTEST_CHECK(other(x, attentions).attentions->empty());
  PatchKeys cleanup{{"ToyAttn"}};
  tracetorch::register_patch_mapping({{"ToyAttn", tracetorch::replacement<OtherAttn>()}});
  DOCTEST_CHECK(other(x, attentions).attentions->empty());  // registered, not yet patched: as upstream
  const auto report = tracetorch::patch_output_recorders(other);
  DOCTEST_REQUIRE(report.size() == 2);
  DOCTEST_CHECK(report[1].field == "attentions");
  DOCTEST_CHECK(report[1].target == "ToyAttn");
  DOCTEST_CHECK(report[1].replacement == "OtherAttn");
  DOCTEST_CHECK(report[0].replacement.empty());
  const auto patched = other(x, attentions);
  DOCTEST_REQUIRE(patched.attentions->size() == 2);
  DOCTEST_CHECK(torch::equal((*patched.attentions)[0], torch::softmax(x, -1)));
  // Patching is per model class: ToyModel still records ToyAttn until it is patched, then only
  // the replacement, which it does not contain.
  DOCTEST_CHECK(original(x, attentions).attentions->size() == 2);
  tracetorch::patch_output_recorders(original);
  DOCTEST_CHECK(original(x, attentions).attentions->empty());
  tracetorch::unpatch_output_recorders();
  DOCTEST_CHECK(original(x, attentions).attentions->size() == 2);
  DOCTEST_CHECK(other(x, attentions).attentions->empty());
}

DOCTEST_TEST_CASE("recorder targets match subclasses, as isinstance; compile-time replacements too") {
  const auto x = torch::randn({1, 4});
  FusedToyModel subclassed(2, 4);  // FusedToyAttnImpl derives from ToyAttnImpl
  const auto out = subclassed(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], torch::softmax(x, -1)));
  StaticToyModel static_model(2, 4);
  DOCTEST_CHECK(static_model(x, tracetorch::OutputOptions{.output_attentions = true}).attentions->size() == 2);
}

DOCTEST_TEST_CASE("layer_name is a substring of the path written with a leading dot, as upstream") {
  using tracetorch::detail::path_has_layer_name;
  DOCTEST_CHECK(path_has_layer_name("layer.0.crossattention.self", ".crossattention"));
  DOCTEST_CHECK(path_has_layer_name("crossattention", ".crossattention"));
  DOCTEST_CHECK(path_has_layer_name("h.0.attn", ".attn"));
  DOCTEST_CHECK(path_has_layer_name("layer.0.crossattention.self", "attention"));  // a substring matches
  DOCTEST_CHECK_FALSE(path_has_layer_name("layer.0.crossattention.self", ".attention"));
  DOCTEST_CHECK(path_has_layer_name("layer.0.attention_x.self", ".attention"));
  DOCTEST_CHECK(path_has_layer_name("anything", ""));
}

DOCTEST_TEST_CASE("a model with no layers: hidden_states is (last_hidden_state,)") {
  ToyModel empty(0, 4);
  const auto x = torch::randn({1, 4});
  const auto out = empty(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  DOCTEST_REQUIRE(out.hidden_states->size() == 1);
  DOCTEST_CHECK(torch::equal(out.hidden_states->front(), out.last_hidden_state));
  DOCTEST_CHECK(out.attentions->empty());
}

DOCTEST_TEST_CASE("an output with vision_hidden_states ties the last hidden state to it") {
  VisionToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_REQUIRE(out.hidden_states->size() == 3);
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.vision_hidden_states));
  DOCTEST_CHECK_FALSE(torch::equal(out.hidden_states->back(), out.last_hidden_state));
}

DOCTEST_TEST_CASE("two recorders under attentions: split by position into attentions and cross_attentions") {
  SelfCrossToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_REQUIRE(out.cross_attentions->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    DOCTEST_CHECK(torch::equal((*out.attentions)[i], model->self_weights[i]));
    DOCTEST_CHECK(torch::equal((*out.cross_attentions)[i], model->cross_weights[i]));
  }
}

DOCTEST_TEST_CASE("recorder indices: OutputRecorder defaults to 0, a bare type to the field's; one tensor is recorded whole") {
  IndexToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  // attentions: OutputRecorder<ToyAttn> (index 0: x * 2), then ToyLayer as a bare type (index 1,
  // but it returns one tensor: recorded whole), then OptAttn's std::optional weights (None skipped).
  DOCTEST_REQUIRE(out.attentions->size() == 3);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], x * 2));
  DOCTEST_CHECK(torch::equal((*out.attentions)[1], model->layer_output));
  DOCTEST_CHECK(torch::equal((*out.attentions)[2], torch::softmax(x, -1)));
  DOCTEST_REQUIRE(out.cross_attentions->size() == 1);  // OutputRecorder<ToyAttn, -1>: the last element
  DOCTEST_CHECK(torch::equal(out.cross_attentions->front(), torch::softmax(x, -1)));
}

DOCTEST_TEST_CASE("recorder modules that never ran through their traced forward: an error, not an empty capture") {
  ImplCallingToy model;
  const auto x = torch::randn({1, 4});
  DOCTEST_CHECK_THROWS_WITH_AS(model(x, tracetorch::OutputOptions{.output_hidden_states = true}),
                               doctest::Contains("none ran through its traced forward"), tracetorch::Error);
  DOCTEST_CHECK_NOTHROW(model(x));  // nothing requested: nothing checked
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

DOCTEST_TEST_CASE("cross-attention model: attentions and cross_attentions from one class, told apart by layer_name") {
  torch::manual_seed(5);
  bert::BertConfig config;
  bert::BertDecoderModel model(config);
  model->eval();
  const auto ids = torch::randint(0, config.vocab_size, {2, 5});
  const auto encoder_states = torch::randn({2, 9, config.hidden_size});
  const auto out = model(ids, encoder_states,
                         tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_REQUIRE(out.cross_attentions.has_value());
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_REQUIRE(out.cross_attentions->size() == 2);
  for (const auto& a : *out.attentions) DOCTEST_CHECK((a.sizes() == c10::IntArrayRef{2, 4, 5, 5}));
  for (const auto& c : *out.cross_attentions) DOCTEST_CHECK((c.sizes() == c10::IntArrayRef{2, 4, 5, 9}));
  DOCTEST_CHECK(out.hidden_states->size() == 3);
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.last_hidden_state));
  // cross_attentions follow output_attentions: off, both are None.
  const auto quiet = model(ids, encoder_states, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_CHECK_FALSE(quiet.attentions.has_value());
  DOCTEST_CHECK_FALSE(quiet.cross_attentions.has_value());
  // Capture leaves the outputs unchanged.
  DOCTEST_CHECK(torch::equal(quiet.last_hidden_state, out.last_hidden_state));
  // No encoder states: no cross-attention call, an empty list.
  const auto self_only = model(ids, torch::Tensor(), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_CHECK(self_only.cross_attentions->empty());
  DOCTEST_CHECK(self_only.attentions->size() == 2);
}

DOCTEST_TEST_CASE("the Llama fixture: hidden_states[i] is the input of layers.i, the last is norm's output") {
  const auto config = llama::LlamaConfig::from_json_file(tiny_llama_dir() / "config.json");
  llama::LlamaModel model(config);
  model->eval();
  llama::load_state_dict(*model, tiny_llama_dir() / "model.safetensors");
  const auto ids = tracetorch::safetensors::load_single(tiny_llama_dir() / "input_ids.safetensors", "input_ids");
  const auto out = model({.input_ids = ids}, {.output_hidden_states = true, .output_attentions = true});
  const auto ref = tiny_llama_dir() / "trace_st";
  DOCTEST_REQUIRE(out.hidden_states->size() == static_cast<std::size_t>(config.num_hidden_layers + 1));
  for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) {
    DOCTEST_INFO("layer ", i);
    const auto expected =
        tracetorch::safetensors::load_single(ref / ("LlamaModel.layers." + std::to_string(i) + "_inputs_args_0.safetensors"));
    DOCTEST_CHECK(torch::allclose((*out.hidden_states)[i], expected, 0, 1e-5));
  }
  const auto norm = tracetorch::safetensors::load_single(ref / "LlamaModel.norm_outputs.safetensors");
  DOCTEST_CHECK(torch::allclose(out.hidden_states->back(), norm, 0, 1e-5));
  DOCTEST_REQUIRE(out.attentions->size() == static_cast<std::size_t>(config.num_hidden_layers));
  for (const auto& weights : *out.attentions) {
    DOCTEST_CHECK((weights.sizes() == c10::IntArrayRef{ids.size(0), config.num_attention_heads, ids.size(1), ids.size(1)}));
    DOCTEST_CHECK(torch::allclose(weights.sum(-1), torch::ones({1})));        // rows are distributions
    DOCTEST_CHECK(weights.triu(1).abs().max().item<float>() == 0.0f);          // causal
  }
  // Capture leaves the result unchanged.
  DOCTEST_CHECK(torch::equal(model({.input_ids = ids}).last_hidden_state, out.last_hidden_state));
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
