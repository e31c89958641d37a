#pragma once
// Toy models shared by the capture tests (test_capture, test_output, test_record_map,
// test_patch_mapping): layers, attentions with and without weights, replacements, nested
// and cross-attention models, and the helpers that check what they capture.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <string>
#include <vector>

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
