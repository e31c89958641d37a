#pragma once
/// \file
/// capture_outputs' steps once something is requested: recorder specs from the record map, a
/// session around the forward body, the collected values filled into its output.

#include <torch/torch.h>

#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/detail/capture/fill_output.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/detail/capture/recorder_specs.hpp"
#include "tracetorch/detail/capture/session.hpp"

namespace tracetorch::detail {

/// Runs `body` with `Model`'s record map watching `model`, and fills what it saw into the output.
template <class Model, class Body>
auto run_capture(Model& model, const ResolvedOutputs& wanted, Body& body, const CaptureSettings& settings)
    -> std::invoke_result_t<Body&> {
  using Out = std::invoke_result_t<Body&>;
  using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
  constexpr std::size_t slot_count = std::tuple_size_v<Records>;
  std::vector<RecorderSpec> specs;
  std::vector<CaptureSlot> slots(slot_count);
  prepare_slots<Records>(wanted, patched_recorders<std::remove_cv_t<Model>>(), specs, slots,
                         std::make_index_sequence<slot_count>{});
  CaptureSession session(std::move(specs), std::move(slots),
                         wanted.hidden_states.any() ? std::optional(wanted.hidden_states) : std::nullopt);
  session.attach(static_cast<torch::nn::Module&>(model));
  Out out = body();
  session.detach();
  session.check_something_was_seen(static_cast<const torch::nn::Module&>(model).name());
  finish_slots<Records>(out, session.slots(), wanted, settings, std::make_index_sequence<slot_count>{});
  return out;
}

}  // namespace tracetorch::detail
