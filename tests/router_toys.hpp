#pragma once
// Toy models for record keys beyond hidden_states / attentions (a mixture-of-experts model with
// a top-k router, as transformers' Qwen2-MoE) and for index functions (a block whose output list
// changes length with use_cache, as GPT-2's). Shared by tests/test_record_map_keys.cpp and
// tests/test_capture_mirror.cpp; tests/data/capture_mirror/make_capture_mirror.py builds the
// same MoE model in Python.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace router_toys {

struct MoeConfig {
  std::int64_t hidden_size = 4;
  std::int64_t num_experts = 4;
  std::int64_t num_experts_per_tok = 2;
  bool norm_topk_prob = true;
  int num_hidden_layers = 2;
  bool output_router_logits = false;  // as in Qwen2-MoE's config.json
  bool output_attentions = false;
};

/// transformers' MoeModelOutputWithPast without the cache.
struct MoeModelOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> router_logits;
};
TRACETORCH_OUTPUT(MoeModelOutput, last_hidden_state, hidden_states, attentions, router_logits);

/// Qwen2-MoE's top-k router: a linear gate, softmax over the experts, the top k of them
/// (renormalised when norm_topk_prob). Returns (router probabilities [tokens, experts], top-k
/// weights [tokens, k], top-k expert indices [tokens, k]).
struct TopKRouterImpl : torch::nn::Module {
  explicit TopKRouterImpl(const MoeConfig& config)
      : top_k(config.num_experts_per_tok), norm_topk_prob(config.norm_topk_prob), hidden(config.hidden_size) {
    weight = register_parameter("weight", torch::zeros({config.num_experts, config.hidden_size}));
  }
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states) {
    const auto logits = torch::nn::functional::linear(hidden_states.reshape({-1, hidden}), weight);
    const auto probabilities = torch::softmax(logits, -1, torch::kFloat);
    auto [top_values, top_indices] = torch::topk(probabilities, top_k, -1);
    if (norm_topk_prob) top_values = top_values / top_values.sum(-1, /*keepdim=*/true);
    return {probabilities, top_values, top_indices};
  }
  std::int64_t top_k;
  bool norm_topk_prob;
  std::int64_t hidden;
  torch::Tensor weight;
};
TRACEABLE(TopKRouter);

/// The router's experts, each a bias-free linear map; every token's output is the sum of its
/// top-k experts weighted by the router (computed densely: unselected experts weigh 0).
struct SparseMoeBlockImpl : torch::nn::Module {
  explicit SparseMoeBlockImpl(const MoeConfig& config) {
    gate = register_module("gate", TopKRouter(config));
    experts = register_module("experts", torch::nn::ModuleList());
    for (std::int64_t e = 0; e < config.num_experts; ++e) {
      experts->push_back(tracetorch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.hidden_size).bias(false)));
    }
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) {
    const auto flat = hidden_states.reshape({-1, hidden_states.size(-1)});
    const auto [probabilities, top_values, top_indices] = gate(flat);
    auto out = torch::zeros_like(flat);
    for (std::size_t e = 0; e < experts->size(); ++e) {
      const auto weight = (top_values * (top_indices == static_cast<std::int64_t>(e))).sum(-1, /*keepdim=*/true);
      out = out + experts[e]->as<tracetorch::nn::Linear>()->forward(flat) * weight;
    }
    return out.reshape(hidden_states.sizes());
  }
  TopKRouter gate{nullptr};
  torch::nn::ModuleList experts{nullptr};
};
TRACEABLE(SparseMoeBlock);

/// Self-attention without heads: softmax(h h^T / 2) h, then a projection; returns (output, weights).
struct MoeAttentionImpl : torch::nn::Module {
  explicit MoeAttentionImpl(const MoeConfig& config) {
    o_proj = register_module(
        "o_proj", tracetorch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.hidden_size).bias(false)));
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states) {
    const auto weights = torch::softmax(torch::matmul(hidden_states, hidden_states.transpose(-1, -2)) / 2.0, -1);
    return {o_proj(torch::matmul(weights, hidden_states)), weights};
  }
  tracetorch::nn::Linear o_proj{nullptr};
};
TRACEABLE(MoeAttention);

struct MoeDecoderLayerImpl : torch::nn::Module {
  explicit MoeDecoderLayerImpl(const MoeConfig& config) {
    self_attn = register_module("self_attn", MoeAttention(config));
    mlp = register_module("mlp", SparseMoeBlock(config));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states) {
    const auto h = hidden_states + std::get<0>(self_attn(hidden_states));
    return h + mlp(h);
  }
  MoeAttention self_attn{nullptr};
  SparseMoeBlock mlp{nullptr};
};
TRACEABLE(MoeDecoderLayer);

/// The base model; `norm` scales the last layer's output (a stand-in for the final norm).
struct MoeModelImpl : torch::nn::Module {
  /// Qwen2MoePreTrainedModel._can_record_outputs, in its order.
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"router_logits", tracetorch::OutputRecorder<TopKRouter, 0>>(),
      tracetorch::record<"hidden_states", MoeDecoderLayer>(),
      tracetorch::record<"attentions", MoeAttention>());

  explicit MoeModelImpl(MoeConfig config_in) : config(config_in) {
    layers = register_module("layers", torch::nn::ModuleList());
    for (int i = 0; i < config.num_hidden_layers; ++i) layers->push_back(MoeDecoderLayer(config));
    norm = register_parameter("norm", torch::ones({config.hidden_size}));
  }
  MoeModelOutput forward(const torch::Tensor& inputs_embeds, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      auto h = inputs_embeds;
      for (std::size_t i = 0; i < layers->size(); ++i) h = layers[i]->as<MoeDecoderLayer>()->forward(h);
      return MoeModelOutput{.last_hidden_state = h * norm};
    });
  }
  /// Loads "<prefix>.<parameter name>" from `tensors` into every parameter.
  void load(const std::map<std::string, torch::Tensor>& tensors, const std::string& prefix) {
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) item.value().copy_(tensors.at(prefix + "." + item.key()));
  }
  MoeConfig config;
  torch::nn::ModuleList layers{nullptr};
  torch::Tensor norm;
};
TRACEABLE(MoeModel);

// ---- index functions: a block whose output list changes length with use_cache ----

struct VarBlockKeywords {
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
};
TRACETORCH_KEYWORDS(VarBlockKeywords, use_cache);

/// As GPT-2's block: (hidden, present, weights) with use_cache, (hidden, weights) without.
struct VarBlockImpl : torch::nn::Module {
  std::vector<torch::Tensor> forward(const torch::Tensor& h, const VarBlockKeywords& kw = {}) {
    const auto weights = torch::softmax(h, -1);
    if (*kw.use_cache) return {h * 2, torch::stack({h, h + 1}), weights};
    return {h * 2, weights};
  }
};
TRACEABLE(VarBlock);

/// The weights' index from the call's keywords (use_cache defaults to false, as the forward's).
inline std::int64_t weights_index(const tracetorch::CallKeywords& kw) { return kw.flag("use_cache").value_or(false) ? 2 : 1; }
/// The same from the output's length.
inline std::int64_t weights_index_of_output(const std::vector<torch::Tensor>& out) { return out.size() == 3 ? 2 : 1; }
/// A wrong index function: past the end without a cache.
inline std::int64_t always_two(const tracetorch::CallKeywords&) { return 2; }

/// Returns (hidden, step count, weights): an index function reading element 1 names no tensor.
struct CountingBlockImpl : torch::nn::Module {
  std::tuple<torch::Tensor, std::int64_t, torch::Tensor> forward(const torch::Tensor& h, const VarBlockKeywords& kw = {}) {
    return {h, *kw.use_cache ? 1 : 0, torch::softmax(h, -1)};
  }
};
TRACEABLE(CountingBlock);

struct VarOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> attentions;
  std::optional<std::vector<torch::Tensor>> cross_attentions;
};
TRACETORCH_OUTPUT(VarOutput, last_hidden_state, attentions, cross_attentions);

/// Calls its block with use_cache true, then false, then not passed.
template <class Recorder>
struct VarModelTImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(tracetorch::record<"attentions", Recorder>());
  VarModelTImpl() { block = register_module("block", VarBlock()); }
  VarOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      block(x, {.use_cache = true});
      block(x + 1, {.use_cache = false});
      return VarOutput{.last_hidden_state = block(x + 2)[0]};
    });
  }
  VarBlock block{nullptr};
};
using KeywordIndexModelImpl = VarModelTImpl<tracetorch::OutputRecorder<VarBlock, weights_index>>;
using OutputIndexModelImpl = VarModelTImpl<tracetorch::OutputRecorder<VarBlock, weights_index_of_output>>;
using LastIndexModelImpl = VarModelTImpl<tracetorch::OutputRecorder<VarBlock, -1>>;
using WrongIndexModelImpl = VarModelTImpl<tracetorch::OutputRecorder<VarBlock, always_two>>;
TRACEABLE(KeywordIndexModel);
TRACEABLE(OutputIndexModel);
TRACEABLE(LastIndexModel);
TRACEABLE(WrongIndexModel);

/// Calls its CountingBlock with use_cache true, then false: the second index names the count.
struct NotTensorIndexModelImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"attentions", tracetorch::OutputRecorder<CountingBlock, weights_index>>());
  NotTensorIndexModelImpl() { block = register_module("block", CountingBlock()); }
  VarOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      block(x, {.use_cache = true});
      return VarOutput{.last_hidden_state = std::get<0>(block(x, {.use_cache = false}))};
    });
  }
  CountingBlock block{nullptr};
};
TRACEABLE(NotTensorIndexModel);

/// A block around a VarBlock: called with use_cache, it calls the inner one without, so an index
/// function's answers nest.
struct OuterBlockImpl : torch::nn::Module {
  OuterBlockImpl() { inner = register_module("inner", VarBlock()); }
  std::vector<torch::Tensor> forward(const torch::Tensor& h, const VarBlockKeywords& kw = {}) {
    const auto inner_out = inner(h, {.use_cache = !*kw.use_cache});
    const auto weights = torch::softmax(inner_out[0], -1);
    if (*kw.use_cache) return {inner_out[0], h, weights};
    return {inner_out[0], weights};
  }
  VarBlock inner{nullptr};
};
TRACEABLE(OuterBlock);

struct NestedIndexModelImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"attentions", tracetorch::OutputRecorder<OuterBlock, weights_index>>(),
      tracetorch::record<"cross_attentions", tracetorch::OutputRecorder<VarBlock, weights_index>>());
  NestedIndexModelImpl() { outer = register_module("outer", OuterBlock()); }
  VarOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      outer(x, {.use_cache = true});
      return VarOutput{.last_hidden_state = outer(x)[0]};
    });
  }
  OuterBlock outer{nullptr};
};
TRACEABLE(NestedIndexModel);

}  // namespace router_toys
