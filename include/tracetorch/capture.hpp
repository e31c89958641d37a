#pragma once
/// \file
/// Output capturing: transformers' `@capture_outputs`, `_can_record_outputs` and `OutputRecorder`
/// in compile-time form. A base model declares which submodules produce which output field; the
/// model's forward wraps its body in `capture_outputs`, which collects hidden states and
/// attention maps from those submodules while the body runs, and fills them into the output.
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

#include <boost/pfr.hpp>
#include <boost/preprocessor/punctuation/comma_if.hpp>
#include <boost/preprocessor/seq/for_each.hpp>
#include <boost/preprocessor/seq/for_each_i.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/size.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "tracetorch/detail/attachments.hpp"
#include "tracetorch/detail/call.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch {

// ---------------------------------------------------------------------------------------------
// Options of a forward
// ---------------------------------------------------------------------------------------------

/// Positions of hidden_states to keep: `.output_hidden_states = tracetorch::layers{1, 3}` is
/// transformers' `output_hidden_states=[1, 3]`.
struct layers {
  layers(std::initializer_list<std::int64_t> chosen) : indices(chosen) {}
  std::vector<std::int64_t> indices;
};

/// `output_hidden_states`: all (true), none (false), or the listed positions. Positions count
/// as in the returned sequence: 0 is the embedding output, i the output of layer i.
class LayerSelection {
 public:
  LayerSelection(bool all) : all_(all) {}  // NOLINT: implicit, so `.output_hidden_states = true` reads naturally
  LayerSelection(layers chosen) : indices_(std::move(chosen.indices)), listed_(true) {  // NOLINT: implicit
    for (const auto index : indices_) {
      if (index < 0) {
        throw Error("tracetorch: output_hidden_states: position " + std::to_string(index) +
                    " is negative; list positions from 0 (the embedding output)");
      }
    }
  }

  bool any() const noexcept { return all_ || !indices_.empty(); }
  bool includes(std::int64_t position) const noexcept {
    return all_ || std::find(indices_.begin(), indices_.end(), position) != indices_.end();
  }
  bool is_list() const noexcept { return listed_; }
  const std::vector<std::int64_t>& indices() const noexcept { return indices_; }
  bool all() const noexcept { return all_; }

 private:
  bool all_ = false;
  std::vector<std::int64_t> indices_;
  bool listed_ = false;
};

/// What a caller asks of a forward, as transformers' keyword arguments; unset means "ask the
/// model's config" (a `config` member with the same names), else false.
struct OutputOptions {
  std::optional<LayerSelection> output_hidden_states;
  std::optional<bool> output_attentions;
  std::optional<bool> use_cache;
  std::optional<bool> return_dict;
  /// Trace this call with the model addition debugger, as upstream's `debug_io=True`: into
  /// `debug_io_dir` (default "model_debug"), pruned when `prune_layers` (default false, as
  /// upstream's None). The traced module needs nothing: its traced forward sees these keywords.
  std::optional<bool> debug_io;
  std::optional<std::string> debug_io_dir;
  std::optional<bool> prune_layers;
};

/// In a trace, options appear as Python keyword arguments holding only what was set, so a call
/// without options traces exactly like `model(input_ids)` in Python.
template <class Visitor>
void tracetorch_keywords(const OutputOptions& options, Visitor&& visit) {
  if (options.output_hidden_states) {
    if (options.output_hidden_states->is_list()) {
      visit("output_hidden_states", options.output_hidden_states->indices());
    } else {
      visit("output_hidden_states", options.output_hidden_states->all());
    }
  }
  if (options.output_attentions) visit("output_attentions", *options.output_attentions);
  if (options.use_cache) visit("use_cache", *options.use_cache);
  if (options.return_dict) visit("return_dict", *options.return_dict);
  if (options.debug_io) visit("debug_io", *options.debug_io);
  if (options.debug_io_dir) visit("debug_io_dir", *options.debug_io_dir);
  if (options.prune_layers) visit("prune_layers", *options.prune_layers);
}

/// How `capture_outputs` finishes hidden_states.
struct CaptureSettings {
  /// Replace the last recorded hidden state by the output's (post-norm) last_hidden_state, as
  /// transformers does by default.
  bool tie_last_hidden_states = true;
};

namespace detail {

// ---------------------------------------------------------------------------------------------
// Output structs: named fields
// ---------------------------------------------------------------------------------------------

/// One field of an output struct, by name and member pointer.
template <FixedString Name, auto Member>
struct NamedField {
  static constexpr std::string_view name = Name.view();
  static constexpr auto member = Member;
};

template <class T>
concept has_output_fields = requires(const T* p) { tracetorch_output_fields(p); };

template <class T>
using output_fields_t = decltype(tracetorch_output_fields(static_cast<const T*>(nullptr)));

template <class T>
inline constexpr bool always_false = false;

/// The name of the field that `Member` points to, from the struct's TRACETORCH_OUTPUT.
template <auto Member>
struct member_name;
template <class Field, class Struct, Field Struct::*Member>
struct member_name<Member> {
  static_assert(has_output_fields<Struct>,
                "tracetorch::record<&Output::field>: declare the output struct's fields with TRACETORCH_OUTPUT(...)");
  template <class F>
  static constexpr std::string_view name_if_same() {
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(F::member)>, Field Struct::*>) {
      return F::member == Member ? F::name : std::string_view();
    } else {
      return {};
    }
  }
  template <class... F>
  static constexpr std::string_view find(std::tuple<F...>*) {
    std::string_view found;
    ((found = found.empty() ? name_if_same<F>() : found), ...);
    return found;
  }
  static constexpr std::string_view value = find(static_cast<output_fields_t<Struct>*>(nullptr));
  static_assert(!value.empty(), "tracetorch::record<&Output::field>: the field is not listed in TRACETORCH_OUTPUT");
};

// ---------------------------------------------------------------------------------------------
// Roles and recorders
// ---------------------------------------------------------------------------------------------

enum class OutputRole { hidden_states, attentions };

constexpr bool is_known_field(std::string_view field) {
  return field == "hidden_states" || field == "attentions" || field == "cross_attentions";
}

/// The index a bare type in a record map gets: upstream's 0 for a hidden_states key, else 1.
/// (An OutputRecorder written out defaults to 0, as upstream's dataclass does.)
inline constexpr int field_default_index = std::numeric_limits<int>::min();
constexpr int default_index_of(std::string_view field) {
  // By hand: GCC's UBSan build does not take string_view::find as a constant expression here.
  constexpr std::string_view key = "hidden_states";
  for (std::size_t at = 0; at + key.size() <= field.size(); ++at) {
    if (field.substr(at, key.size()) == key) return 0;
  }
  return 1;
}
/// cross_attentions follow output_attentions, as in transformers.
constexpr OutputRole role_of(std::string_view field) {
  return field == "hidden_states" ? OutputRole::hidden_states : OutputRole::attentions;
}

template <class Signature>
struct member_function_result;
#define TRACETORCH_DETAIL_RESULT_OF(QUALIFIERS)              \
  template <class R, class C, class... A>                    \
  struct member_function_result<R (C::*)(A...) QUALIFIERS> { \
    using type = R;                                          \
  }
TRACETORCH_DETAIL_RESULT_OF();
TRACETORCH_DETAIL_RESULT_OF(const);
TRACETORCH_DETAIL_RESULT_OF(noexcept);
TRACETORCH_DETAIL_RESULT_OF(const noexcept);
#undef TRACETORCH_DETAIL_RESULT_OF

/// The element index a recorder reads, Python's negative indices counted from the end; checked,
/// readably, against `Traced`'s forward output. A forward returning one tensor is recorded whole,
/// whatever the index (upstream records a non-tuple output as it is).
template <class Traced, int Index>
constexpr int checked_output_index() {
  using Pointer = typename forward_pointer<typename Traced::ImplType>::type;
  if constexpr (std::is_void_v<Pointer>) {  // an overloaded or template forward: checked at run time
    static_assert(Index >= 0,
                  "tracetorch::OutputRecorder: a negative index needs a target with one, non-template forward");
    return Index;
  } else {
    using R = std::remove_cvref_t<typename member_function_result<Pointer>::type>;
    if constexpr (std::is_same_v<R, torch::Tensor>) {
      return 0;
    } else if constexpr (is_tuple_like<R>) {
      constexpr int size = static_cast<int>(std::tuple_size_v<R>);
      constexpr int index = Index < 0 ? Index + size : Index;
      static_assert(index >= 0 && index < size,
                    "tracetorch::OutputRecorder: index out of range for the target's forward output tuple");
      if constexpr (index >= 0 && index < size) {
        using Element = std::remove_cvref_t<std::tuple_element_t<index, R>>;
        static_assert(std::is_same_v<Element, torch::Tensor> || std::is_same_v<Element, std::optional<torch::Tensor>>,
                      "tracetorch::OutputRecorder: index names an element of the target's forward output that is "
                      "neither a torch::Tensor nor a std::optional<torch::Tensor>");
      }
      return index;
    } else {
      static_assert(always_false<R>,
                    "tracetorch::OutputRecorder: the target's forward returns neither a tensor nor a tuple");
      return 0;
    }
  }
}

}  // namespace detail

/// Compile-time replacements of a module type (type-level patch mapping): a recorder that
/// targets `Original` also records the listed types. Specialise for the holder type:
/// `template <> struct tracetorch::replacements<LlamaAttention> { using types = std::tuple<FusedAttention>; };`
template <class Original>
struct replacements {
  using types = std::tuple<>;
};

/// transformers' `OutputRecorder(target_class, index=..., layer_name=...)`: records element
/// `Index` of the output of every module that is a `Target` (holder or Impl type of a TRACEABLE
/// class, or a class derived from it: Python's isinstance), as upstream: the index defaults to 0,
/// counts from the end when negative, and a module returning one tensor is recorded whole;
/// `LayerName` is matched as a substring of the module's path written with a leading dot
/// (`".crossattention."` matches `.encoder.layer.0.crossattention.self`).
template <class Target, int Index = 0, detail::FixedString LayerName = "">
struct OutputRecorder {
#ifndef TRACETORCH_DISABLE
  static_assert(is_traceable_v<Target>,
                "tracetorch::OutputRecorder: the target module type was never declared TRACEABLE");
#endif
  using target = typename std::conditional_t<is_traceable_v<Target>, detail::traced_type<Target>,
                                             std::type_identity<void>>::type;
  using original = Target;
  static constexpr int index = Index;
  static constexpr std::string_view layer_name = LayerName.view();
};

namespace detail {

template <class R>
struct as_recorder {
  using type = OutputRecorder<R, field_default_index>;
};
template <class T, int I, FixedString L>
struct as_recorder<OutputRecorder<T, I, L>> {
  using type = OutputRecorder<T, I, L>;
};

template <FixedString Name>
struct field_named {
  static constexpr std::string_view name = Name.view();
};
template <auto Member>
struct field_at {
  static constexpr std::string_view name = member_name<Member>::value;
};

}  // namespace detail

/// One entry of a record map: an output field and the recorders that fill it.
template <class FieldKey, class... Recorders>
struct OutputRecord {
  static constexpr std::string_view field = FieldKey::name;
  static_assert(detail::is_known_field(field),
                "tracetorch::record: the field must be hidden_states, attentions or cross_attentions");
  static constexpr detail::OutputRole role = detail::role_of(field);
  using recorders = std::tuple<Recorders...>;

  /// Two recorders under attentions are self- and cross-attention in one list, split by
  /// position into attentions and cross_attentions (upstream's rule).
  static constexpr bool splits_cross_attentions = field == "attentions" && sizeof...(Recorders) == 2;

  template <class Recorder>
  static constexpr int index_of() {
#ifdef TRACETORCH_DISABLE
    return 0;
#else
    if constexpr (!is_traceable_v<typename Recorder::original>) {
      return 0;  // OutputRecorder's static_assert said it; nothing more to add
    } else {
      constexpr int written =
          Recorder::index == detail::field_default_index ? detail::default_index_of(field) : Recorder::index;
      return detail::checked_output_index<typename Recorder::target, written>();
    }
#endif
  }
  static constexpr bool indices_checked = ((index_of<Recorders>() >= 0) && ...);
};

/// A record-map entry naming its field: `record<"attentions", OutputRecorder<LlamaAttention, 1>>()`.
/// A recorder may be given as a bare module type (`record<"hidden_states", LlamaDecoderLayer>()`).
template <detail::FixedString Field, class... Recorders>
constexpr auto record() {
  static_assert(sizeof...(Recorders) > 0, "tracetorch::record: name at least one recorder");
  using Entry = OutputRecord<detail::field_named<Field>, typename detail::as_recorder<Recorders>::type...>;
  static_assert(Entry::indices_checked);
  return Entry{};
}

/// A record-map entry by member pointer: `record<&Output::attentions, LlamaAttention>()`.
template <auto Member, class... Recorders>
  requires std::is_member_object_pointer_v<decltype(Member)>
constexpr auto record() {
  static_assert(sizeof...(Recorders) > 0, "tracetorch::record: name at least one recorder");
  using Entry = OutputRecord<detail::field_at<Member>, typename detail::as_recorder<Recorders>::type...>;
  static_assert(Entry::indices_checked);
  return Entry{};
}

/// The record map, transformers' `_can_record_outputs`:
/// `static constexpr auto can_record_outputs = tracetorch::output_records(record<...>(), ...);`
template <class... Records>
constexpr std::tuple<Records...> output_records(Records...) {
  return {};
}

// ---------------------------------------------------------------------------------------------
// Run-time patch mapping (transformers' monkey_patching registry)
// ---------------------------------------------------------------------------------------------

/// A replacement module type, as a registry value: `tracetorch::replacement<FusedAttention>()`.
struct PatchReplacement {
  std::type_index type;
  std::string name;
};

template <class T>
PatchReplacement replacement() {
#ifdef TRACETORCH_DISABLE
  return {std::type_index(typeid(T)), std::string()};
#else
  static_assert(is_traceable_v<T>, "tracetorch::replacement: the replacement type was never declared TRACEABLE");
  using Traced = detail::traced_type_t<T>;
  return {std::type_index(typeid(Traced)), std::string(Traced::registered_name)};
#endif
}

namespace detail {

struct PatchEntry {
  std::string key;
  // The compiled pattern behind a function, so that only code that registers a mapping
  // includes RE2 (patch_mapping.hpp).
  std::function<bool(std::string_view)> matches;
  PatchReplacement replacement;
};

struct PatchRegistry {
  std::mutex mutex;
  std::vector<PatchEntry> entries;  // registration order; an overwritten key keeps its place
};

inline PatchRegistry& patch_registry() {
  static PatchRegistry registry;
  return registry;
}

}  // namespace detail

/// The registered replacement for a class name: an exact key first, then the first pattern (in
/// registration order) that regex-searches successfully in the name.
inline std::optional<PatchReplacement> find_patch_replacement(std::string_view class_name) {
  auto& registry = detail::patch_registry();
  std::lock_guard lock(registry.mutex);
  for (const auto& entry : registry.entries) {
    if (entry.key == class_name) return entry.replacement;
  }
  for (const auto& entry : registry.entries) {
    if (entry.matches(class_name)) return entry.replacement;
  }
  return std::nullopt;
}

namespace detail {

// ---------------------------------------------------------------------------------------------
// Collection
// ---------------------------------------------------------------------------------------------

/// One recorder, resolved for one capture: the modules it accepts and where it puts values.
struct RecorderSpec {
  std::size_t slot;
  OutputRole role;
  std::size_t index;
  std::string_view layer_name;
  bool (*is_target)(const torch::nn::Module&) = nullptr;  // isinstance(module, target); null once patched
  std::vector<std::type_index> types;                     // replacements, matched exactly
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

template <class Tuple>
struct type_indices;
template <class... T>
struct type_indices<std::tuple<T...>> {
  static void append(std::vector<std::type_index>& out) {
    static_assert((is_traceable_v<T> && ...), "tracetorch::replacements: every replacement type must be TRACEABLE");
    (out.emplace_back(typeid(traced_type_t<T>)), ...);
  }
};

template <class Impl>
bool is_instance_of(const torch::nn::Module& module) {
  return dynamic_cast<const Impl*>(&module) != nullptr;
}

// ---------------------------------------------------------------------------------------------
// Models that capture: where an outer model's recorders stop, and their patched recorders
// ---------------------------------------------------------------------------------------------

/// A model class whose forward runs capture_outputs: transformers' PreTrainedModel with a record
/// map. Registered once per class, before main, by the capture_outputs it instantiates.
struct CapturingModelType {
  std::type_index type;
  bool (*is_instance)(const torch::nn::Module&);
  void (*recorder_targets)(std::vector<std::pair<std::string_view, std::string_view>>&);  // (field, class name)
};

struct CapturingModels {
  std::mutex mutex;
  std::vector<CapturingModelType> types;
  /// After patch_output_recorders: per model class, the recorder targets (by class name) and
  /// the replacement each now records instead.
  std::map<std::type_index, std::map<std::string, PatchReplacement, std::less<>>> patched;
};

inline CapturingModels& capturing_models() {
  static CapturingModels models;
  return models;
}

template <class Record, class... Recorders>
void append_record_targets(std::vector<std::pair<std::string_view, std::string_view>>& out, std::tuple<Recorders...>*) {
  (out.emplace_back(Record::field, Recorders::target::registered_name), ...);
}

template <class Model>
void record_map_targets(std::vector<std::pair<std::string_view, std::string_view>>& out) {
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
std::map<std::string, PatchReplacement, std::less<>> patched_recorders() {
  auto& models = capturing_models();
  std::lock_guard lock(models.mutex);
  const auto found = models.patched.find(std::type_index(typeid(Model)));
  return found == models.patched.end() ? std::map<std::string, PatchReplacement, std::less<>>() : found->second;
}

template <class Recorder>
void resolve_targets(RecorderSpec& spec, const std::map<std::string, PatchReplacement, std::less<>>& patched) {
  using Traced = typename Recorder::target;
  using Impl = typename Traced::ImplType;
  if (const auto found = patched.find(Traced::registered_name); found != patched.end()) {
    spec.types.push_back(found->second.type);  // upstream swaps the target class for the replacement
    return;
  }
  spec.is_target = &is_instance_of<Impl>;
  type_indices<typename replacements<typename Recorder::original>::types>::append(spec.types);
  if constexpr (!std::is_same_v<Impl, typename Recorder::original>) {
    type_indices<typename replacements<Impl>::types>::append(spec.types);
  }
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
    ++calls_;
    const auto& spec = specs_[at.tag];
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
    torch::Tensor value = result.tensor(spec.index);
    if (spec.role == OutputRole::hidden_states) {
      if (slot.positions == 0) add_hidden(slot, std::move(slot.first_layer_input));
      add_hidden(slot, std::move(value));
    } else if (value.defined()) {  // no attention weights (None in Python): skipped
      slot.values.push_back(std::move(value));
    }
  }

  void on_unwind(const Attachment&) noexcept override {}

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
  AttachmentSet attachments_;
};

/// A config flag that is a bool or a std::optional<bool> (None), read the one way.
template <class T>
std::optional<bool> config_flag(const T& value) {
  if constexpr (is_optional_like<T>) {
    return value.has_value() ? std::optional<bool>(static_cast<bool>(*value)) : std::nullopt;
  } else {
    return static_cast<bool>(value);
  }
}

// The config members transformers reads for capture; absent members read as None.
template <class Model>
std::optional<bool> config_output_attentions(const Model& model) {
  if constexpr (requires { model.config.output_attentions; }) return config_flag(model.config.output_attentions);
  return std::nullopt;
}
template <class Model>
std::optional<bool> config_return_dict(const Model& model) {
  if constexpr (requires { model.config.return_dict; }) return config_flag(model.config.return_dict);
  return std::nullopt;
}
template <class Model>
std::optional<bool> config_use_cache(const Model& model) {
  if constexpr (requires { model.config.use_cache; }) return config_flag(model.config.use_cache);
  return std::nullopt;
}
template <class Model>
std::optional<LayerSelection> config_output_hidden_states(const Model& model) {
  if constexpr (requires { model.config.output_hidden_states; }) {
    if (const auto flag = config_flag(model.config.output_hidden_states)) return LayerSelection(*flag);
  }
  return std::nullopt;
}

}  // namespace detail

/// Resolved output flags of one forward.
struct ResolvedOutputs {
  LayerSelection hidden_states = false;
  bool attentions = false;
  /// Upstream's return_dict (call, else config, else true). A C++ forward returns its struct
  /// either way; where it is false, `to_tuple(out, model)` is what Python would have returned.
  bool return_dict = true;
};

/// output_hidden_states / output_attentions from the call's options, else the model's
/// `config`, else false.
template <class Model>
ResolvedOutputs resolve_output_options(const Model& model, const OutputOptions& options) {
  ResolvedOutputs resolved;
  if (options.output_hidden_states) {
    resolved.hidden_states = *options.output_hidden_states;
  } else if (auto from_config = detail::config_output_hidden_states(model)) {
    resolved.hidden_states = *from_config;
  }
  resolved.attentions = options.output_attentions.value_or(detail::config_output_attentions(model).value_or(false));
  resolved.return_dict = options.return_dict.value_or(detail::config_return_dict(model).value_or(true));
  return resolved;
}

namespace detail {

template <class Record, class Field, class Out, class Value>
void store_if_named(Out& out, Value& value) {
  if constexpr (Field::name == Record::field) {
    using Type = std::remove_cvref_t<decltype(out.*Field::member)>;
    static_assert(std::is_same_v<Type, std::optional<std::vector<torch::Tensor>>>,
                  "tracetorch::capture_outputs: a recorded field must be std::optional<std::vector<torch::Tensor>>");
    out.*Field::member = std::move(value);
  }
}

/// Moves `values` into the field named `Record::field` (found through TRACETORCH_OUTPUT).
template <class Record, class Out, class Value, class... Fields>
void store_field(Out& out, Value&& value, std::tuple<Fields...>*) {
  constexpr std::size_t matches = ((Fields::name == Record::field ? 1 : 0) + ... + 0);
  static_assert(matches == 1, "tracetorch::capture_outputs: the record map names a field the output struct lacks");
  (store_if_named<Record, Fields>(out, value), ...);
}

using PatchedTargets = std::map<std::string, PatchReplacement, std::less<>>;

template <class Record, class Recorder>
void add_recorder_spec(std::vector<RecorderSpec>& specs, std::size_t slot, const PatchedTargets& patched) {
  RecorderSpec spec{slot, Record::role, static_cast<std::size_t>(Record::template index_of<Recorder>()),
                    Recorder::layer_name, nullptr, {}};
  resolve_targets<Recorder>(spec, patched);
  specs.push_back(std::move(spec));
}

template <class Record, class... Recorders>
void add_record_specs(std::vector<RecorderSpec>& specs, std::size_t slot, const PatchedTargets& patched,
                      std::tuple<Recorders...>*) {
  (add_recorder_spec<Record, Recorders>(specs, slot, patched), ...);
}

template <class Record>
void prepare_slot(const ResolvedOutputs& wanted, const PatchedTargets& patched, std::vector<RecorderSpec>& specs,
                  std::vector<CaptureSlot>& slots, std::size_t slot) {
  const bool requested = Record::role == OutputRole::hidden_states ? wanted.hidden_states.any() : wanted.attentions;
  slots[slot].requested = requested;
  if (requested) add_record_specs<Record>(specs, slot, patched, static_cast<typename Record::recorders*>(nullptr));
}

template <class Records, std::size_t... Slot>
void prepare_slots(const ResolvedOutputs& wanted, const PatchedTargets& patched, std::vector<RecorderSpec>& specs,
                   std::vector<CaptureSlot>& slots, std::index_sequence<Slot...>) {
  (prepare_slot<std::tuple_element_t<Slot, Records>>(wanted, patched, specs, slots, Slot), ...);
}

/// The value upstream ties the last hidden state to: vision_hidden_states where the output has
/// that field, else last_hidden_state; none (no tie) when it has neither.
template <class Out>
std::optional<torch::Tensor> tied_hidden_state(const Out& out) {
  if constexpr (requires { out.vision_hidden_states; }) {
    return tensor_of(out.vision_hidden_states);
  } else if constexpr (requires { out.last_hidden_state; }) {
    return tensor_of(out.last_hidden_state);
  } else {
    return std::nullopt;
  }
}

template <FixedString Name>
struct record_named {
  static constexpr std::string_view field = Name.view();
};

/// Field `Name` of `Out`, which must be a list of tensors.
template <FixedString Name, class Out>
void store_named(Out& out, std::vector<torch::Tensor> values) {
  store_field<record_named<Name>>(out, std::move(values), static_cast<output_fields_t<Out>*>(nullptr));
}

template <class Record, class Out>
void finish_slot(Out& out, CaptureSlot& slot, const ResolvedOutputs& wanted, const CaptureSettings& settings) {
  if (!slot.requested) return;
  if constexpr (Record::role == OutputRole::hidden_states) {
    // Upstream drops the last recorded state and appends the tied one: with no layers at all,
    // the tuple is (last_hidden_state,).
    if (const auto tied = tied_hidden_state(out); tied && settings.tie_last_hidden_states) {
      if (!slot.values.empty()) slot.values.pop_back();
      const auto position = static_cast<std::int64_t>(slot.values.size());
      slot.values.push_back(wanted.hidden_states.includes(position) ? *tied : torch::Tensor());
    }
  }
  if constexpr (Record::splits_cross_attentions) {
    std::vector<torch::Tensor> self, cross;
    for (std::size_t i = 0; i < slot.values.size(); ++i) (i % 2 == 0 ? self : cross).push_back(std::move(slot.values[i]));
    store_named<"attentions">(out, std::move(self));
    store_named<"cross_attentions">(out, std::move(cross));
  } else {
    store_field<Record>(out, std::move(slot.values), static_cast<output_fields_t<Out>*>(nullptr));
  }
}

template <class Records, class Out, std::size_t... Slot>
void finish_slots(Out& out, std::vector<CaptureSlot>& slots, const ResolvedOutputs& wanted,
                  const CaptureSettings& settings, std::index_sequence<Slot...>) {
  (finish_slot<std::tuple_element_t<Slot, Records>>(out, slots[Slot], wanted, settings), ...);
}

}  // namespace detail

/// transformers' `@capture_outputs` around a base model's forward body. `model` is the model
/// (usually `*this`), whose class declares `static constexpr auto can_record_outputs`. Nothing
/// requested: the body runs with no collection work at all.
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
  constexpr std::size_t slot_count = std::tuple_size_v<Records>;

  (void)detail::capturing_model_registered<std::remove_cv_t<Model>>;  // so that an outer model's recorders stop here

  const ResolvedOutputs wanted = resolve_output_options(model, options);
  if (!wanted.hidden_states.any() && !wanted.attentions) return body();

  std::vector<detail::RecorderSpec> specs;
  std::vector<detail::CaptureSlot> slots(slot_count);
  detail::prepare_slots<Records>(wanted, detail::patched_recorders<std::remove_cv_t<Model>>(), specs, slots,
                                 std::make_index_sequence<slot_count>{});
  detail::CaptureSession session(std::move(specs), std::move(slots),
                                 wanted.hidden_states.any() ? std::optional(wanted.hidden_states) : std::nullopt);
  session.attach(static_cast<torch::nn::Module&>(model));
  Out out = body();
  session.detach();
  session.check_something_was_seen(static_cast<const torch::nn::Module&>(model).name());
  detail::finish_slots<Records>(out, session.slots(), wanted, settings, std::make_index_sequence<slot_count>{});
  return out;
#endif
}

/// transformers' `@merge_with_config_defaults`: use_cache from the model's config unless given.
template <class Model>
OutputOptions merge_with_config_defaults(const Model& model, OutputOptions options) {
  if (!options.use_cache) options.use_cache = detail::config_use_cache(model);
  return options;
}

/// A recorder of a model's record map, resolved against the patch registry.
struct PatchedRecorder {
  std::string field;
  std::string target;       // the class name the record map names
  std::string replacement;  // the registered replacement's name, empty when none
};

/// transformers' `patch_output_recorders(model)`: for `model` and every sub-model in it that
/// captures outputs, each recorder whose target class name has a registered replacement (exact
/// name first, then patterns, as find_patch_replacement) records the replacement from now on,
/// instead of the original: for every instance of that model class, as upstream's class-level
/// record map. Returns what each recorder of those models now records. Without this call the
/// registry does not change what is recorded.
template <class ModelHolder>
std::vector<PatchedRecorder> patch_output_recorders(const ModelHolder& model) {
  std::vector<PatchedRecorder> report;
#ifndef TRACETORCH_DISABLE
  auto& models = detail::capturing_models();
  std::vector<detail::CapturingModelType> types;
  {
    std::lock_guard lock(models.mutex);
    types = models.types;
  }
  std::vector<std::type_index> done;
  for (const auto& module : model->modules(/*include_self=*/true)) {
    for (const auto& type : types) {
      if (!type.is_instance(*module) || std::find(done.begin(), done.end(), type.type) != done.end()) continue;
      done.push_back(type.type);
      std::vector<std::pair<std::string_view, std::string_view>> targets;
      type.recorder_targets(targets);
      for (const auto& [field, target] : targets) {
        auto replacement = find_patch_replacement(target);
        report.push_back({std::string(field), std::string(target), replacement ? replacement->name : std::string()});
        if (!replacement) continue;
        std::lock_guard lock(models.mutex);
        models.patched[type.type].insert_or_assign(std::string(target), std::move(*replacement));
      }
    }
  }
#else
  (void)model;
#endif
  return report;
}

/// Undoes patch_output_recorders for every model class (tracetorch's own: upstream has no way
/// back short of a new process; tests need one).
inline void unpatch_output_recorders() {
  auto& models = detail::capturing_models();
  std::lock_guard lock(models.mutex);
  models.patched.clear();
}

// ---------------------------------------------------------------------------------------------
// return_dict=false
// ---------------------------------------------------------------------------------------------

/// An output struct as transformers' `ModelOutput.to_tuple()`: its fields in order, None ones
/// (undefined tensors, empty optionals) left out; `out[0].toTensor()`.
class OutputTuple {
 public:
  std::size_t size() const noexcept { return items_.size(); }
  const c10::IValue& operator[](std::size_t i) const {
    if (i >= items_.size()) {
      throw Error("tracetorch: OutputTuple index " + std::to_string(i) + " out of range (size " +
                  std::to_string(items_.size()) + ")");
    }
    return items_[i];
  }
  auto begin() const noexcept { return items_.begin(); }
  auto end() const noexcept { return items_.end(); }

  void push_back(c10::IValue value) { items_.push_back(std::move(value)); }

 private:
  std::vector<c10::IValue> items_;
};

namespace detail {

/// A to_tuple item that c10::IValue cannot hold itself.
template <class T>
struct TupleObject final : torch::CustomClassHolder {
  explicit TupleObject(T object) : value(std::move(object)) {}
  T value;
};

template <class T>
void append_tuple_item(OutputTuple& tuple, const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    if (value.defined()) tuple.push_back(value);
  } else if constexpr (is_optional_like<U>) {
    if (value.has_value()) append_tuple_item(tuple, *value);
  } else if constexpr (std::is_same_v<U, std::vector<torch::Tensor>>) {
    tuple.push_back(c10::IValue(c10::List<torch::Tensor>(value)));
  } else if constexpr (std::is_constructible_v<c10::IValue, const U&>) {
    tuple.push_back(c10::IValue(value));
  } else {
    // An object (a cache, a pointer to one): kept as it is in a capsule, None when null.
    if (!is_none_like(value)) tuple.push_back(c10::IValue::make_capsule(c10::make_intrusive<TupleObject<U>>(value)));
  }
}

}  // namespace detail

/// Field `i` of an OutputTuple that holds an object of type `T` (a field IValue cannot hold, such
/// as `std::shared_ptr<DynamicCache>`); a tracetorch::Error if it holds something else.
template <class T>
const T& tuple_object(const OutputTuple& tuple, std::size_t i) {
  const auto& item = tuple[i];
  if (item.isCapsule()) {
    const auto capsule = item.toCapsule();
    if (const auto* object = dynamic_cast<const detail::TupleObject<T>*>(capsule.get())) return object->value;
  }
  throw Error("tracetorch: OutputTuple item " + std::to_string(i) + " is not an object of the type asked for");
}

/// The tuple form of an output struct, in field order (through Boost.PFR).
template <class Out>
OutputTuple to_tuple(const Out& out) {
  OutputTuple tuple;
  boost::pfr::for_each_field(out, [&](const auto& field) { detail::append_tuple_item(tuple, field); });
  return tuple;
}

namespace detail {

/// The class holding the record map: the Impl of a holder, or the class itself.
template <class Model>
auto record_map_owner() {
  if constexpr (requires { Model::can_record_outputs; }) {
    return std::type_identity<Model>{};
  } else {
    return std::type_identity<typename traced_type_t<Model>::ImplType>{};
  }
}

/// The fields capture_outputs sets, in the order it sets them (upstream: record-map order, a
/// split attentions record followed by cross_attentions).
template <class Owner>
std::vector<std::string_view> captured_fields() {
  using Records = std::remove_cvref_t<decltype(Owner::can_record_outputs)>;
  std::vector<std::string_view> names;
  std::apply(
      [&](auto... record) {
        ((names.push_back(decltype(record)::field),
          decltype(record)::splits_cross_attentions ? names.push_back("cross_attentions") : void()),
         ...);
      },
      Records{});
  return names;
}

}  // namespace detail

/// The tuple `model` would return with return_dict=False, as upstream orders a ModelOutput: the
/// fields the forward set itself first, in declaration order, then the captured ones in the order
/// capture set them (to_tuple(out) keeps declaration order). None fields are left out.
template <class Out, class Model>
OutputTuple to_tuple(const Out& out, const Model&) {
  using Owner = typename decltype(detail::record_map_owner<Model>())::type;
  const auto captured = detail::captured_fields<Owner>();
  const auto is_captured = [&](std::string_view name) {
    return std::find(captured.begin(), captured.end(), name) != captured.end();
  };
  OutputTuple tuple;
  tracetorch_fields(out, [&](std::string_view name, const auto& value) {
    if (!is_captured(name)) detail::append_tuple_item(tuple, value);
  });
  for (const auto wanted : captured) {
    tracetorch_fields(out, [&](std::string_view name, const auto& value) {
      if (name == wanted) detail::append_tuple_item(tuple, value);
    });
  }
  return tuple;
}

}  // namespace tracetorch

#define TRACETORCH_DETAIL_VISIT_FIELD(r, value, field) visit(BOOST_PP_STRINGIZE(field), value.field);
#define TRACETORCH_DETAIL_NAMED_FIELD(r, Type, i, field) \
  BOOST_PP_COMMA_IF(i)::tracetorch::detail::NamedField<BOOST_PP_STRINGIZE(field), &Type::field>

/// Declares an output struct's fields, in declaration order, after the struct (in its
/// namespace): the C++ form of a transformers ModelOutput dataclass. Traces show the struct as
/// an object keyed by field name with None fields left out; capture_outputs finds fields by name.
#define TRACETORCH_OUTPUT(Type, ...)                                                                            \
  template <class Visitor>                                                                                      \
  void tracetorch_fields(const Type& value, Visitor&& visit) {                                                  \
    BOOST_PP_SEQ_FOR_EACH(TRACETORCH_DETAIL_VISIT_FIELD, value, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))          \
  }                                                                                                             \
  constexpr auto tracetorch_output_fields(const Type*) {                                                        \
    static_assert(::boost::pfr::tuple_size_v<Type> == BOOST_PP_VARIADIC_SIZE(__VA_ARGS__),                     \
                  "TRACETORCH_OUTPUT(" #Type ", ...) must list every field of the struct");                     \
    return std::tuple<BOOST_PP_SEQ_FOR_EACH_I(TRACETORCH_DETAIL_NAMED_FIELD, Type,                              \
                                              BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))>{};                        \
  }                                                                                                             \
  static_assert(true)
