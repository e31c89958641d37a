#pragma once
/// \file
/// One capture's collection: the recorders' modules watched during one forward on one thread,
/// their outputs gathered into a slot per output field.

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <typeindex>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/capture/call_keywords.hpp"
#include "tracetorch/capture/capturing_models.hpp"
#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// One recorder, resolved for one capture: the modules it accepts and where it puts values.
struct RecorderSpec {
  std::size_t slot;
  OutputRole role;
  std::int64_t index;  // negative only for a result of run-time length: counted from its end
  std::string_view layer_name;
  bool (*is_target)(const torch::nn::Module&) = nullptr;  // isinstance(module, target); null once patched
  std::vector<std::type_index> types;                     // replacements, matched exactly
  /// The recorder's index function of the call's keywords, else null.
  std::int64_t (*index_from_keywords)(const CallKeywords&) = nullptr;
  /// Reads element `index` (or the one the index function of the output says) from a result of
  /// the target's type; null for a target with an overloaded or template forward.
  torch::Tensor (*read)(const CallResult&, std::int64_t index, std::string_view path) = nullptr;
};

/// Upstream's layer_name test: a substring of the module's path, which upstream writes with a
/// leading dot (`.encoder.layer.0.attention.self`).
inline bool path_has_layer_name(std::string_view path, std::string_view layer_name) {
  if (layer_name.empty()) return true;
  std::string dotted;
  dotted.reserve(path.size() + 1);
  dotted += '.';
  dotted += path;
  return dotted.find(layer_name) != std::string::npos;
}

/// Values collected for one output field.
struct CaptureSlot {
  bool requested = false;
  std::vector<torch::Tensor> values;
  std::int64_t positions = 0;       // hidden_states: positions seen so far, kept or not
  torch::Tensor first_layer_input;  // hidden_states: the input of the first recorded layer
  bool has_first_input = false;
};

/// Watches the recorders' modules during one forward on one thread.
class CaptureSession final : public CallObserver {
 public:
  CaptureSession(std::vector<RecorderSpec> specs, std::vector<CaptureSlot> slots, std::optional<LayerSelection> hidden)
      : specs_(std::move(specs)),
        slots_(std::move(slots)),
        hidden_(std::move(hidden)),
        owner_(std::this_thread::get_id()) {}

  /// Attaches to the recorders' modules under `model`, as upstream installs its hooks: a
  /// sub-model that captures for itself is left to its own record map.
  void attach(torch::nn::Module& model) {
    const SubModelTest starts_sub_model;
    attach_below(model, "", starts_sub_model);
  }

  bool on_enter(const Attachment& at, const CallArgs& args) override {
    if (std::this_thread::get_id() != owner_) return false;  // another thread's forward: not ours
    const auto& spec = specs_[at.tag];
    // Calls on one thread nest, so the index of the call now ending is always the last one pushed.
    if (spec.index_from_keywords != nullptr) keyword_indices_.push_back(spec.index_from_keywords(keywords_of(args)));
    ++calls_;
    auto& slot = slots_[spec.slot];
    if (spec.role == OutputRole::hidden_states && slot.positions == 0 && !slot.has_first_input) {
      slot.first_layer_input = args.tensor(0);
      slot.has_first_input = true;
    }
    return true;
  }

  void on_exit(const Attachment& at, const CallResult& result) override {
    const auto& spec = specs_[at.tag];
    auto& slot = slots_[spec.slot];
    std::int64_t index = spec.index;
    if (spec.index_from_keywords != nullptr) {
      index = keyword_indices_.back();
      keyword_indices_.pop_back();
    }
    torch::Tensor value = spec.read != nullptr ? spec.read(result, index, at.module_path)
                                               : result.tensor(static_cast<std::size_t>(index));
    if (spec.role == OutputRole::hidden_states) {
      if (slot.positions == 0) add_hidden(slot, std::move(slot.first_layer_input));
      add_hidden(slot, std::move(value));
    } else if (value.defined()) {  // no attention weights (None in Python): skipped
      slot.values.push_back(std::move(value));
    }
  }

  void on_unwind(const Attachment& at) noexcept override {
    if (specs_[at.tag].index_from_keywords != nullptr) keyword_indices_.pop_back();
  }

  void detach() noexcept { attachments_.detach(); }
  std::vector<CaptureSlot>& slots() noexcept { return slots_; }

  /// Recorder modules exist but not one was called through its traced forward: a forward that
  /// calls its layers through their Impl (`as<LayerImpl>()->forward`) bypasses tracing, and the
  /// capture would silently come back empty.
  void check_something_was_seen(std::string_view model_name) const {
    if (attached_count_ == 0 || calls_ > 0) return;
    throw Error("tracetorch::capture_outputs: " + std::string(model_name) + " has " + std::to_string(attached_count_) +
                " recorder module(s) (first: " + first_attached_ +
                ") but none ran through its traced forward: call them through their holder "
                "(`layers[i]->as<DecoderLayer>()->forward(...)`), not their Impl");
  }

 private:
  void attach_below(torch::nn::Module& parent, const std::string& parent_path, const SubModelTest& starts_sub_model) {
    for (const auto& child : parent.named_children()) {
      const std::string path = parent_path.empty() ? child.key() : parent_path + "." + child.key();
      torch::nn::Module& module = *child.value();
      if (!starts_sub_model(module)) attach_below(module, path, starts_sub_model);
      attach_if_recorded(module, path);
    }
  }

  void attach_if_recorded(torch::nn::Module& module, const std::string& path) {
    auto* traced = dynamic_cast<TracedModuleBase*>(&module);
    if (traced == nullptr) return;
    const std::type_index type(typeid(module));
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      const auto& spec = specs_[i];
      const bool is_target = (spec.is_target != nullptr && spec.is_target(module)) ||
                             std::find(spec.types.begin(), spec.types.end(), type) != spec.types.end();
      if (!is_target || !path_has_layer_name(path, spec.layer_name)) continue;
      attachments_.add(*traced, *this, path, i);
      if (attached_count_++ == 0) first_attached_ = path;
    }
  }

  void add_hidden(CaptureSlot& slot, torch::Tensor value) {
    // Positions not asked for stay undefined: the sequence keeps its full length.
    slot.values.push_back(hidden_ && hidden_->includes(slot.positions) ? std::move(value) : torch::Tensor());
    ++slot.positions;
  }

  std::vector<RecorderSpec> specs_;
  std::vector<CaptureSlot> slots_;
  std::optional<LayerSelection> hidden_;
  std::thread::id owner_;
  std::size_t attached_count_ = 0;  // only for check_something_was_seen's message
  std::string first_attached_;
  std::size_t calls_ = 0;
  std::vector<std::int64_t> keyword_indices_;  // of the calls under way, innermost last
  AttachmentSet attachments_;
};

}  // namespace tracetorch::detail
