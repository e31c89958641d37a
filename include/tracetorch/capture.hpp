#pragma once
/// \file
/// Output capturing: transformers' `@capture_outputs`, `_can_record_outputs` and `OutputRecorder`
/// in compile-time form. A base model declares which submodules produce which output field; the
/// model's forward wraps its body in `capture_outputs`, which collects hidden states and
/// attention maps from those submodules while the body runs, and fills them into the output.
/// Includes the output structs (output.hpp), record maps (record_map.hpp) and the patch
/// registry (patch_mapping.hpp).
///
/// \code
/// struct BaseModelOutputWithPast {
///   torch::Tensor last_hidden_state;
///   std::optional<std::vector<torch::Tensor>> hidden_states;
///   std::optional<std::vector<torch::Tensor>> attentions;
/// };
/// TRACETORCH_OUTPUT(BaseModelOutputWithPast, last_hidden_state, hidden_states, attentions);
///
/// struct LlamaModelImpl : torch::nn::Module {
///   static constexpr auto can_record_outputs = tracetorch::output_records(
///       tracetorch::record<"hidden_states", LlamaDecoderLayer>(),
///       tracetorch::record<"attentions", tracetorch::OutputRecorder<LlamaAttention, 1>>());
///   BaseModelOutputWithPast forward(torch::Tensor ids, const tracetorch::OutputOptions& options = {}) {
///     return tracetorch::capture_outputs(*this, options, [&] { ...; return BaseModelOutputWithPast{h}; });
///   }
/// };
/// \endcode

#include <torch/torch.h>

#include <type_traits>

#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/detail/capture/run_capture.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/output.hpp"
#include "tracetorch/capture/patch_api.hpp"  // the patch API without RE2 (patch_mapping.hpp registers)
#include "tracetorch/record_map.hpp"

namespace tracetorch {

/// transformers' `@capture_outputs` around a base model's forward body. `model` is the model
/// (usually `*this`), whose class declares `static constexpr auto can_record_outputs`. Each key
/// is asked for by its flag: output_hidden_states, output_attentions (also for cross_attentions),
/// and `output_<key>` for any other key (`.output = {{"router_logits", true}}`, else the config's
/// `output_router_logits`). Nothing requested: the body runs with no collection work at all.
/// \code
/// return tracetorch::capture_outputs(*this, options, [&] { return BaseModelOutputWithPast{norm(h)}; },
///                                    tracetorch::CaptureSettings{.tie_last_hidden_states = false});
/// \endcode
template <class Model, class Body>
auto capture_outputs(Model& model, const OutputOptions& options, Body&& body, CaptureSettings settings = {})
    -> std::invoke_result_t<Body&> {
  using Out = std::invoke_result_t<Body&>;
#ifdef TRACETORCH_DISABLE
  (void)model, (void)options, (void)settings;
  return body();  // compiled out: outputs stay as the body made them
#else
  static_assert(requires { Model::can_record_outputs; },
                "tracetorch::capture_outputs: the model class must declare "
                "`static constexpr auto can_record_outputs = tracetorch::output_records(...)`");
  static_assert(detail::has_output_fields<Out>,
                "tracetorch::capture_outputs: declare the output struct's fields with TRACETORCH_OUTPUT(...)");
  using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
  static_assert(detail::record_fields_declared<Out>(static_cast<Records*>(nullptr)));
  (void)detail::capturing_model_registered<std::remove_cv_t<Model>>;  // so that an outer model's recorders stop here
  detail::check_output_keys(options);
  const ResolvedOutputs wanted = detail::resolve_output_options<Out>(model, options);
  if (!wanted.any()) return body();
  return detail::run_capture(model, wanted, body, settings);
#endif
}

/// transformers' `@merge_with_config_defaults`: use_cache from the model's config unless given.
/// \code
/// return tracetorch::capture_outputs(*this, tracetorch::merge_with_config_defaults(*this, options), [&] { ... });
/// \endcode
template <class Model>
OutputOptions merge_with_config_defaults(const Model& model, OutputOptions options) {
  return detail::merge_with_config_defaults(model, std::move(options));
}

}  // namespace tracetorch
