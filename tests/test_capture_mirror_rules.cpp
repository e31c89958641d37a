// tracetorch/capture.hpp and patch_mapping.hpp against Python: nested models, patch mapping and
// layer_name on small models, each compared (count, order and values, in to_tuple order) with a
// Python mirror of transformers' rules on the same weights
// (tests/data/capture_mirror/make_capture_mirror.py, rules in upstream_capture.py).

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "capture_mirror_helpers.hpp"
#include "capture_toys.hpp"

namespace {

/// A ToyModel inside a model that records the same classes: upstream's outer record map stops at
/// the sub-model, whose own record map collects its layers in its own capture.
struct NestedToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"hidden_states", ToyLayer>(), tracetorch::record<"attentions", ToyAttn>());
  NestedToyImpl() {
    inner = register_module("inner", ToyModel(2, 4));
    own = register_module("own", ToyAttn());
    layer = register_module("layer", ToyLayer(4));
  }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      inner_output = inner(x, options);
      return ToyOutput{.last_hidden_state = layer(std::get<0>(own(inner_output.last_hidden_state)))};
    });
  }
  ToyOutput inner_output;
  ToyModel inner{nullptr};
  ToyAttn own{nullptr};
  ToyLayer layer{nullptr};
};
TRACEABLE(NestedToy);

struct SubFusedToyAttnImpl : FusedToyAttnImpl {
  using FusedToyAttnImpl::FusedToyAttnImpl;
};
TRACEABLE(SubFusedToyAttn);

struct FastToyLayerImpl : ToyLayerImpl {
  using ToyLayerImpl::ToyLayerImpl;
};
TRACEABLE(FastToyLayer);

/// Originals (ToyAttn, ToyLayer) beside replacements and a replacement's subclass, to see which
/// ones patch_output_recorders leaves recorded.
struct PatchToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"hidden_states", tracetorch::OutputRecorder<ToyLayer, 0>>(),
                                 tracetorch::record<"attentions", ToyAttn>());
  PatchToyImpl() {
    attn = register_module("attn", ToyAttn());
    layer = register_module("layer", ToyLayer(4));
    fused = register_module("fused", FusedToyAttn());
    fast_layer = register_module("fast_layer", FastToyLayer(4));
    fused_sub = register_module("fused_sub", SubFusedToyAttn());
  }
  ToyOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      auto h = layer(std::get<0>(attn(x)));
      h = fast_layer(std::get<0>(fused(h)));
      return ToyOutput{.last_hidden_state = std::get<0>(fused_sub(h))};
    });
  }
  ToyAttn attn{nullptr};
  ToyLayer layer{nullptr};
  FusedToyAttn fused{nullptr};
  FastToyLayer fast_layer{nullptr};
  SubFusedToyAttn fused_sub{nullptr};
};
TRACEABLE(PatchToy);

/// layer_name "attn.1" is a substring of .attn.1 and of .cross_attn.1; ".cross" of both .cross_attn.i.
struct LayerNameToyImpl : torch::nn::Module {
  static constexpr auto can_record_outputs = tracetorch::output_records(
      tracetorch::record<"attentions", tracetorch::OutputRecorder<ToyAttn, 1, "attn.1">>(),
      tracetorch::record<"cross_attentions", tracetorch::OutputRecorder<ToyAttn, 0, ".cross">>());
  LayerNameToyImpl() {
    attn = register_module("attn", torch::nn::ModuleList(ToyAttn(), ToyAttn()));
    cross_attn = register_module("cross_attn", torch::nn::ModuleList(ToyAttn(), ToyAttn()));
  }
  SelfCrossOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] {
      auto h = x;
      for (std::size_t i = 0; i < 2; ++i) {
        const auto a = std::get<0>(attn[i]->as<ToyAttn>()->forward(h));
        h = std::get<0>(cross_attn[i]->as<ToyAttn>()->forward(a + 1));
      }
      return SelfCrossOutput{.last_hidden_state = h};
    });
  }
  torch::nn::ModuleList attn{nullptr}, cross_attn{nullptr};
};
TRACEABLE(LayerNameToy);

}  // namespace

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("against Python: a nested model's layers are its own, not the outer model's") {
  NestedToy model;
  load_parameters(*model, "nested");
  const auto out = model(mirror_tensors().at("nested.input"), {.output_hidden_states = true, .output_attentions = true});
  // The outer model has its own layer and attention alone: 2 hidden states, 1 attention map.
  check_against_python("nested.outer", tracetorch::to_tuple(out, model));
  check_against_python("nested.inner", tracetorch::to_tuple(model->inner_output, model->inner));
}

DOCTEST_TEST_CASE("against Python: layer_name is a substring of the module path") {
  LayerNameToy model;
  check_against_python("layername.substring",
                       tracetorch::to_tuple(model(mirror_tensors().at("layername.input"), {.output_attentions = true}), model));
}

DOCTEST_TEST_CASE("against Python: patch_output_recorders - keys in Python's regex syntax, the replacement and its subclasses alone") {
  // Python's order: ToyLayer matches both patterns, the first registered wins; ToyAttn matches the
  // pattern "(?i)^toy" registered before it, but an exact key comes first.
  PatchKeys cleanup{{"(?i)^toylayer$", "(?i)^toy", "ToyAttn"}};
  struct Unpatch {
    ~Unpatch() { tracetorch::unpatch_output_recorders(); }
  } unpatch;
  tracetorch::register_patch_mapping({{"(?i)^toylayer$", tracetorch::replacement<FastToyLayer>()},
                                      {"(?i)^toy", tracetorch::replacement<OtherAttn>()},
                                      {"ToyAttn", tracetorch::replacement<FusedToyAttn>()}});
  PatchToy model;
  load_parameters(*model, "patch");
  const auto x = mirror_tensors().at("patch.input");
  const tracetorch::OutputOptions both{.output_hidden_states = true, .output_attentions = true};
  // Registered, not patched: the originals and all their subclasses are recorded.
  check_against_python("patch.registered", tracetorch::to_tuple(model(x, both), model));

  const auto report = tracetorch::patch_output_recorders(model);
  DOCTEST_REQUIRE(report.size() == 2);
  DOCTEST_CHECK(report[0].replacement == "FastToyLayer");
  DOCTEST_CHECK(report[1].replacement == "FusedToyAttn");
  // Patched: FastToyLayer and FusedToyAttn, SubFusedToyAttn too (isinstance), no longer the originals.
  check_against_python("patch.patched", tracetorch::to_tuple(model(x, both), model));
  tracetorch::unpatch_output_recorders();
  check_against_python("patch.registered", tracetorch::to_tuple(model(x, both), model));
}

DOCTEST_TEST_CASE("against Python: patch_output_recorders leaves a record of two recorders as it is") {
  PatchKeys cleanup{{"ToyAttn"}};
  struct Unpatch {
    ~Unpatch() { tracetorch::unpatch_output_recorders(); }
  } unpatch;
  tracetorch::register_patch_mapping({{"ToyAttn", tracetorch::replacement<FusedToyAttn>()}});
  // Upstream swaps a bare class or an OutputRecorder's target, not a list: SelfCrossToy's two
  // recorders under attentions still record its ToyAttn modules.
  SelfCrossToy listed;
  const auto report = tracetorch::patch_output_recorders(listed);
  DOCTEST_REQUIRE(report.size() == 2);
  DOCTEST_CHECK(report[0].replacement.empty());
  DOCTEST_CHECK(report[1].replacement.empty());
  check_against_python("patch.list_left_alone",
                       tracetorch::to_tuple(listed(mirror_tensors().at("selfcross.input"), {.output_attentions = true}), listed));
}

}  // DOCTEST_TEST_SUITE
