#pragma once
/// \file
/// The model classes that capture (transformers' PreTrainedModels with a record map): where an
/// outer model's recorders stop, and which replacements patch_output_recorders gave each class.

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "tracetorch/capture/output_options.hpp"
#include "tracetorch/capture/patch_registry.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch {

/// A recorder of a model's record map, resolved against the patch registry.
struct PatchedRecorder {
  std::string field;
  std::string target;       // the class name the record map names
  std::string replacement;  // the registered replacement's name, empty when none
};

namespace detail {

template <class Impl>
bool is_instance_of(const torch::nn::Module& module) {
  return dynamic_cast<const Impl*>(&module) != nullptr;
}

/// Per recorder target (by class name), the replacement it records instead.
using PatchedTargets = std::map<std::string, PatchReplacement, std::less<>>;

/// One recorder of a record map: its field, its target's class name, and whether its record lists
/// several recorders (upstream's patch_output_recorders leaves such a list as it is).
struct RecorderTarget {
  std::string_view field;
  std::string_view target;
  bool listed;
};

/// A model class whose forward runs capture_outputs: transformers' PreTrainedModel with a record
/// map. Registered once per class, before main, by the capture_outputs it instantiates.
struct CapturingModelType {
  std::type_index type;
  bool (*is_instance)(const torch::nn::Module&);
  void (*recorder_targets)(std::vector<RecorderTarget>&);
};

struct CapturingModels {
  std::mutex mutex;
  std::vector<CapturingModelType> types;
  /// After patch_output_recorders: per model class, the recorder targets it patched.
  std::map<std::type_index, PatchedTargets> patched;
};

inline CapturingModels& capturing_models() {
  static CapturingModels models;
  return models;
}

template <class Record, class... Recorders>
void append_record_targets(std::vector<RecorderTarget>& out, std::tuple<Recorders...>*) {
  (out.push_back({Record::field, Recorders::target::registered_name, sizeof...(Recorders) > 1}), ...);
}

template <class Model>
void record_map_targets(std::vector<RecorderTarget>& out) {
  using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
  std::apply([&](auto... record) { (append_record_targets<decltype(record)>(out, static_cast<typename decltype(record)::recorders*>(nullptr)), ...); },
             Records{});
}

template <class Model>
bool register_capturing_model() {
  auto& models = capturing_models();
  std::lock_guard lock(models.mutex);
  models.types.push_back({std::type_index(typeid(Model)), &is_instance_of<Model>, &record_map_targets<Model>});
  return true;
}

template <class Model>
inline const bool capturing_model_registered = register_capturing_model<Model>();

/// The record keys some capturing model class of the program declares.
inline std::vector<std::string_view> declared_record_keys() {
  auto& models = capturing_models();
  std::lock_guard lock(models.mutex);
  std::vector<std::string_view> keys;
  std::vector<RecorderTarget> targets;
  for (const auto& type : models.types) type.recorder_targets(targets);
  for (const auto& target : targets) {
    if (std::find(keys.begin(), keys.end(), target.field) == keys.end()) keys.push_back(target.field);
  }
  return keys;
}

/// The call's `output_<key>` flags: each key once, each declared by some record map in the
/// program (upstream passes an unknown `output_x` on through **kwargs, where a misspelling goes
/// unseen; a model in between that lacks the key still passes it on to the sub-model that has it).
[[gnu::cold]] inline void check_declared_output_keys(const OutputOptions& options) {
  const auto declared = declared_record_keys();
  for (std::size_t i = 0; i < options.output.size(); ++i) {
    const auto key = options.output[i].key.name();
    for (std::size_t j = 0; j < i; ++j) {
      if (options.output[j].key.name() == key) throw Error("tracetorch: output_" + std::string(key) + " is given twice");
    }
    if (std::find(declared.begin(), declared.end(), key) != declared.end()) continue;
    std::string known;
    for (const auto name : declared) known += (known.empty() ? "" : ", ") + std::string(name);
    throw Error("tracetorch: output_" + std::string(key) + ": no record map in this program declares the key `" +
                std::string(key) + "` (declared: " + (known.empty() ? "none" : known) + ")");
  }
}
/// Most calls ask for no `output_<key>`: only those pay for (and make the compiler optimize) the check.
inline void check_output_keys(const OutputOptions& options) {
  if (!options.output.empty()) check_declared_output_keys(options);
}

/// Which modules start a sub-model of their own: taken once per capture, not per module.
class SubModelTest {
 public:
  SubModelTest() {
    auto& models = capturing_models();
    std::lock_guard lock(models.mutex);
    for (const auto& type : models.types) tests_.push_back(type.is_instance);
  }
  bool operator()(const torch::nn::Module& module) const {
    return std::any_of(tests_.begin(), tests_.end(), [&](auto test) { return test(module); });
  }

 private:
  std::vector<bool (*)(const torch::nn::Module&)> tests_;
};

/// The replacements patch_output_recorders gave `Model`'s recorders (usually none).
template <class Model>
PatchedTargets patched_recorders() {
  auto& models = capturing_models();
  std::lock_guard lock(models.mutex);
  const auto found = models.patched.find(std::type_index(typeid(Model)));
  return found == models.patched.end() ? PatchedTargets() : found->second;
}

/// Resolves one model class's recorders against the patch registry, records each replacement
/// found, and says what each recorder now records. A recorder in a list keeps its target, as
/// upstream's patch_output_recorders leaves a list of recorders as it is.
inline void patch_model_class(const CapturingModelType& type, std::vector<PatchedRecorder>& report) {
  auto& models = capturing_models();
  std::vector<RecorderTarget> targets;
  type.recorder_targets(targets);
  for (const auto& [field, target, listed] : targets) {
    auto replacement = listed ? std::nullopt : find_patch_replacement(target);
    report.push_back({std::string(field), std::string(target), replacement ? replacement->name : std::string()});
    if (!replacement) continue;
    std::lock_guard lock(models.mutex);
    models.patched[type.type].insert_or_assign(std::string(target), std::move(*replacement));
  }
}

/// patch_output_recorders: each capturing model class found in `model` (itself included), once.
template <class ModelHolder>
std::vector<PatchedRecorder> patch_model_recorders(const ModelHolder& model) {
  std::vector<PatchedRecorder> report;
  auto& models = capturing_models();
  std::vector<CapturingModelType> types;
  {
    std::lock_guard lock(models.mutex);
    types = models.types;
  }
  std::vector<std::type_index> done;
  for (const auto& module : model->modules(/*include_self=*/true)) {
    for (const auto& type : types) {
      if (!type.is_instance(*module) || std::find(done.begin(), done.end(), type.type) != done.end()) continue;
      done.push_back(type.type);
      patch_model_class(type, report);
    }
  }
  return report;
}

inline void unpatch_all_model_recorders() {
  auto& models = capturing_models();
  std::lock_guard lock(models.mutex);
  models.patched.clear();
}

}  // namespace detail

/// The `output_<key>` flags a call may set in this program: one per record key that some capturing
/// model declares, besides output_hidden_states and output_attentions, which every call takes.
/// Found by argument-dependent lookup from the trace programs' `--call` and replay, which see
/// OutputOptions only as a template argument.
inline std::vector<std::string> record_key_flags(const OutputOptions&) {
  std::vector<std::string> flags;
  for (const auto key : detail::declared_record_keys()) {
    if (detail::role_of(key) == detail::OutputRole::keyed) flags.push_back("output_" + std::string(key));
  }
  return flags;
}

}  // namespace tracetorch
