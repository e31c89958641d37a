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

/// Fails to compile, readably, when element `Index` of `Traced`'s forward output is not a tensor.
template <class Traced, int Index>
constexpr bool check_output_index() {
  using Pointer = typename forward_pointer<typename Traced::ImplType>::type;
  if constexpr (!std::is_void_v<Pointer>) {  // an overloaded or template forward: checked at run time
    using R = std::remove_cvref_t<typename member_function_result<Pointer>::type>;
    if constexpr (std::is_same_v<R, torch::Tensor>) {
      static_assert(Index == 0,
                    "tracetorch::OutputRecorder: index out of range: the target's forward returns one tensor "
                    "(only index 0 exists)");
    } else if constexpr (is_tuple_like<R>) {
      static_assert(Index < static_cast<int>(std::tuple_size_v<R>),
                    "tracetorch::OutputRecorder: index out of range for the target's forward output tuple");
      if constexpr (Index < static_cast<int>(std::tuple_size_v<R>)) {
        static_assert(std::is_same_v<std::remove_cvref_t<std::tuple_element_t<Index, R>>, torch::Tensor>,
                      "tracetorch::OutputRecorder: index names an element of the target's forward output that is "
                      "not a torch::Tensor");
      }
    } else {
      static_assert(always_false<R>,
                    "tracetorch::OutputRecorder: the target's forward returns neither a tensor nor a tuple");
    }
  }
  return true;
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
/// `Index` of the output of every `Target` module (holder or Impl type of a TRACEABLE class)
/// whose path contains `LayerName` as whole components (`crossattention` matches
/// `layer.0.crossattention.self`, not `layer.0.crossattention_x`). Index -1: the field's
/// default, 0 for hidden_states and 1 for attentions.
template <class Target, int Index = -1, detail::FixedString LayerName = "">
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
  using type = OutputRecorder<R>;
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

  template <class Recorder>
  static constexpr int index_of() {
    return Recorder::index >= 0 ? Recorder::index : role == detail::OutputRole::attentions ? 1 : 0;
  }
#ifdef TRACETORCH_DISABLE
  static constexpr bool indices_checked = true;
#else
  static constexpr bool indices_checked =
      (detail::check_output_index<typename Recorders::target, index_of<Recorders>()>() && ...);
#endif
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
  // The compiled pattern behind a function: std::regex's matcher is instantiated only where
  // a mapping is registered, not in every translation unit that captures outputs (it is the
  // largest code std::regex makes, seconds of compile time).
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

/// One recorder, resolved for one capture: the module types it accepts and where it puts values.
struct RecorderSpec {
  std::size_t slot;
  OutputRole role;
  std::size_t index;
  std::string_view layer_name;
  std::vector<std::type_index> types;
};

/// True when `layer_name` is one or more whole dot-separated components of `path`.
inline bool path_has_layer_name(std::string_view path, std::string_view layer_name) {
  if (layer_name.empty()) return true;
  std::string padded_path;
  padded_path.reserve(path.size() + 2);
  padded_path += '.';
  padded_path += path;
  padded_path += '.';
  std::string padded_name;
  padded_name.reserve(layer_name.size() + 2);
  padded_name += '.';
  padded_name += layer_name;
  padded_name += '.';
  return padded_path.find(padded_name) != std::string::npos;
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

template <class Recorder>
void append_accepted_types(std::vector<std::type_index>& out) {
  using Traced = typename Recorder::target;
  using Impl = typename Traced::ImplType;
  out.emplace_back(typeid(Traced));
  type_indices<typename replacements<typename Recorder::original>::types>::append(out);
  if constexpr (!std::is_same_v<Impl, typename Recorder::original>) {
    type_indices<typename replacements<Impl>::types>::append(out);
  }
  if (auto patched = find_patch_replacement(Traced::registered_name)) out.push_back(patched->type);
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

  void attach(torch::nn::Module& model) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      auto* traced = dynamic_cast<TracedModuleBase*>(item.value().get());
      if (traced == nullptr) continue;
      const std::type_index type(typeid(*item.value()));
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        const auto& spec = specs_[i];
        if (std::find(spec.types.begin(), spec.types.end(), type) == spec.types.end()) continue;
        if (!path_has_layer_name(item.key(), spec.layer_name)) continue;
        attachments_.add(*traced, *this, item.key(), i);
      }
    }
  }

  void on_enter(const Attachment& at, const CallArgs& args) override {
    if (std::this_thread::get_id() != owner_) return;  // another thread's forward: not ours
    const auto& spec = specs_[at.tag];
    auto& slot = slots_[spec.slot];
    if (spec.role == OutputRole::hidden_states && slot.positions == 0 && !slot.has_first_input) {
      slot.first_layer_input = args.tensor(0);
      slot.has_first_input = true;
    }
  }

  void on_exit(const Attachment& at, const CallResult& result) override {
    if (std::this_thread::get_id() != owner_) return;
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

 private:
  void add_hidden(CaptureSlot& slot, torch::Tensor value) {
    // Positions not asked for stay undefined: the sequence keeps its full length.
    slot.values.push_back(hidden_ && hidden_->includes(slot.positions) ? std::move(value) : torch::Tensor());
    ++slot.positions;
  }

  std::vector<RecorderSpec> specs_;
  std::vector<CaptureSlot> slots_;
  std::optional<LayerSelection> hidden_;
  std::thread::id owner_;
  AttachmentSet attachments_;
};

template <class Model>
std::optional<bool> config_output_attentions(const Model& model) {
  if constexpr (requires { model.config.output_attentions; }) {
    const auto& value = model.config.output_attentions;
    if constexpr (is_optional_like<std::remove_cvref_t<decltype(value)>>) {
      return value;
    } else {
      return static_cast<bool>(value);
    }
  }
  return std::nullopt;
}

template <class Model>
std::optional<LayerSelection> config_output_hidden_states(const Model& model) {
  if constexpr (requires { model.config.output_hidden_states; }) {
    const auto& value = model.config.output_hidden_states;
    if constexpr (is_optional_like<std::remove_cvref_t<decltype(value)>>) {
      if (!value.has_value()) return std::nullopt;
      return LayerSelection(static_cast<bool>(*value));
    } else {
      return LayerSelection(static_cast<bool>(value));
    }
  }
  return std::nullopt;
}

}  // namespace detail

/// Resolved output flags of one forward.
struct ResolvedOutputs {
  LayerSelection hidden_states = false;
  bool attentions = false;
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

template <class Record, class Recorder>
void add_recorder_spec(std::vector<RecorderSpec>& specs, std::size_t slot) {
  RecorderSpec spec{slot, Record::role, static_cast<std::size_t>(Record::template index_of<Recorder>()),
                    Recorder::layer_name, {}};
  append_accepted_types<Recorder>(spec.types);
  specs.push_back(std::move(spec));
}

template <class Record, class... Recorders>
void add_record_specs(std::vector<RecorderSpec>& specs, std::size_t slot, std::tuple<Recorders...>*) {
  (add_recorder_spec<Record, Recorders>(specs, slot), ...);
}

template <class Record>
void prepare_slot(const ResolvedOutputs& wanted, std::vector<RecorderSpec>& specs, std::vector<CaptureSlot>& slots,
                  std::size_t slot) {
  const bool requested = Record::role == OutputRole::hidden_states ? wanted.hidden_states.any() : wanted.attentions;
  slots[slot].requested = requested;
  if (requested) add_record_specs<Record>(specs, slot, static_cast<typename Record::recorders*>(nullptr));
}

template <class Records, std::size_t... Slot>
void prepare_slots(const ResolvedOutputs& wanted, std::vector<RecorderSpec>& specs, std::vector<CaptureSlot>& slots,
                   std::index_sequence<Slot...>) {
  (prepare_slot<std::tuple_element_t<Slot, Records>>(wanted, specs, slots, Slot), ...);
}

template <class Record, class Out>
void finish_slot(Out& out, CaptureSlot& slot, const ResolvedOutputs& wanted, const CaptureSettings& settings) {
  if (!slot.requested) return;
  if constexpr (Record::role == OutputRole::hidden_states) {
    if constexpr (requires { out.last_hidden_state; }) {
      if (settings.tie_last_hidden_states && !slot.values.empty()) {
        const auto last = static_cast<std::int64_t>(slot.values.size()) - 1;
        slot.values.back() = wanted.hidden_states.includes(last) ? out.last_hidden_state : torch::Tensor();
      }
    }
  }
  store_field<Record>(out, std::move(slot.values), static_cast<output_fields_t<Out>*>(nullptr));
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

  const ResolvedOutputs wanted = resolve_output_options(model, options);
  if (!wanted.hidden_states.any() && !wanted.attentions) return body();

  std::vector<detail::RecorderSpec> specs;
  std::vector<detail::CaptureSlot> slots(slot_count);
  detail::prepare_slots<Records>(wanted, specs, slots, std::make_index_sequence<slot_count>{});
  detail::CaptureSession session(std::move(specs), std::move(slots),
                                 wanted.hidden_states.any() ? std::optional(wanted.hidden_states) : std::nullopt);
  session.attach(static_cast<torch::nn::Module&>(model));
  Out out = body();
  session.detach();
  detail::finish_slots<Records>(out, session.slots(), wanted, settings, std::make_index_sequence<slot_count>{});
  return out;
#endif
}

/// transformers' `@merge_with_config_defaults`: use_cache from the model's config unless given.
template <class Model>
OutputOptions merge_with_config_defaults(const Model& model, OutputOptions options) {
  if constexpr (requires { model.config.use_cache; }) {
    if (!options.use_cache) {
      const auto& value = model.config.use_cache;
      if constexpr (detail::is_optional_like<std::remove_cvref_t<decltype(value)>>) {
        options.use_cache = value;
      } else {
        options.use_cache = static_cast<bool>(value);
      }
    }
  }
  return options;
}

/// A recorder of a model's record map, resolved against the patch registry.
struct PatchedRecorder {
  std::string field;
  std::string target;       // the class name the record map names
  std::string replacement;  // the registered replacement's name, empty when none
};

namespace detail {

template <class Record, class... Recorders>
void report_patches(std::vector<PatchedRecorder>& report, std::tuple<Recorders...>*) {
  (
      [&] {
        using Traced = typename Recorders::target;
        auto patched = find_patch_replacement(Traced::registered_name);
        report.push_back({std::string(Record::field), std::string(Traced::registered_name),
                          patched ? patched->name : std::string()});
      }(),
      ...);
}

template <class... Records>
void report_all_patches(std::vector<PatchedRecorder>& report, std::tuple<Records...>*) {
  (report_patches<Records>(report, static_cast<typename Records::recorders*>(nullptr)), ...);
}

}  // namespace detail

/// transformers' `patch_output_recorders(model)`. Here recorders consult the registry at every
/// capture, so this is not needed for capture to see a replacement: it reports, for each
/// recorder of the model's record map, which replacement it will also record.
template <class Model>
std::vector<PatchedRecorder> patch_output_recorders(const Model&) {
#ifdef TRACETORCH_DISABLE
  return {};
#else
  using Impl = typename detail::traced_type_t<Model>::ImplType;
  using Records = std::remove_cvref_t<decltype(Impl::can_record_outputs)>;
  std::vector<PatchedRecorder> report;
  detail::report_all_patches(report, static_cast<Records*>(nullptr));
  return report;
#endif
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
