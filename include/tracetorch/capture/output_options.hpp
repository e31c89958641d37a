#pragma once
/// \file
/// What a caller asks of a forward (OutputOptions, transformers' keyword arguments) and how it
/// resolves against the model's config: one owner for the options and their defaults.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/capture/config_flag.hpp"
#include "tracetorch/detail/capture/output_fields.hpp"
#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/nonfinite/finding.hpp"
#include "tracetorch/detail/module/nonfinite_request.hpp"  // NonFiniteRunner

namespace tracetorch {

namespace detail {

// Called only where an OutputKey is wrong: their names are the compile error's message.
inline void output_key_must_be_a_field_name_without_output_prefix() {}
inline void output_key_has_its_own_option_use_output_hidden_states_or_output_attentions() {}

/// The name TRACETORCH_OUTPUT gives the field `member` points to.
template <class Field, class Struct>
consteval std::string_view field_name_of(Field Struct::*member) {
  static_assert(has_output_fields<Struct>,
                "tracetorch::OutputKey: declare the output struct's fields with TRACETORCH_OUTPUT(...)");
  std::string_view found;
  if constexpr (has_output_fields<Struct>) {
    const auto name_if_same = [&]<class F>(F*) {
      if constexpr (std::is_same_v<std::remove_cv_t<decltype(F::member)>, Field Struct::*>) {
        if (found.empty() && F::member == member) found = F::name;
      }
    };
    [&]<class... F>(std::tuple<F...>*) { (name_if_same(static_cast<F*>(nullptr)), ...); }(
        static_cast<output_fields_t<Struct>*>(nullptr));
  }
  return found;
}

}  // namespace detail

/// A record key asked for by the call, as upstream's `output_<key>=True`: the key's name
/// (`"router_logits"`) or the output field (`&MoeModelOutput::router_logits`, checked by the
/// compiler). Either is checked at compile time to be a field name written without `output_`,
/// and not hidden_states / attentions / cross_attentions, which have their own options.
class OutputKey {
 public:
  template <std::size_t N>
  consteval OutputKey(const char (&key)[N]) : name_(key, N - 1) {  // NOLINT: implicit, `{"router_logits", true}`
    check(name_);
  }
  template <class Field, class Struct>
  consteval OutputKey(Field Struct::*member) : name_(detail::field_name_of(member)) {  // NOLINT: implicit
    check(name_);
  }
  constexpr std::string_view name() const noexcept { return name_; }

  /// A key known only at run time (`output_options(kwargs)`): the same checks, an Error naming
  /// it instead of a compile error. The name is kept for the program's life (one copy per key).
  static OutputKey named(std::string_view key) {
    if (!detail::is_record_key(key) || detail::role_of(key) != detail::OutputRole::keyed) {
      throw Error("tracetorch: output_" + std::string(key) + " is not a record key's flag (output_<key> of a declared record key, "
                  "not output_hidden_states or output_attentions)");
    }
    static std::mutex mutex;
    static std::set<std::string, std::less<>> names;
    const std::lock_guard<std::mutex> lock(mutex);
    return OutputKey(RunTime{}, *names.emplace(key).first);
  }

 private:
  struct RunTime {};
  OutputKey(RunTime, std::string_view name) : name_(name) {}

  static consteval void check(std::string_view key) {
    if (!detail::is_record_key(key)) detail::output_key_must_be_a_field_name_without_output_prefix();
    if (detail::role_of(key) != detail::OutputRole::keyed) {
      detail::output_key_has_its_own_option_use_output_hidden_states_or_output_attentions();
    }
  }
  std::string_view name_;
};

/// `output_<key>=value`: `.output = {{"router_logits", true}}`.
struct OutputFlag {
  OutputKey key;
  bool value;
};

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

namespace detail {
/// The sentinel's service for `find_nonfinite`, `run(root, name, found, call)`: defined in
/// detail/nonfinite/watch.hpp, which <tracetorch/nonfinite.hpp> includes. Only declared here,
/// so that a file that sees OutputOptions but sets no target (a model's) parses none of the
/// sentinel (docs/performance.md, "Compile cost").
template <class Found>
struct NonFiniteService;
}  // namespace detail

/// Where a call's non-finite finding goes: `OutputOptions{.find_nonfinite = &found}`, with
/// `std::optional<tracetorch::NonFinite> found`. Setting it is what makes the sentinel serve the
/// call, so the file that sets it includes <tracetorch/nonfinite.hpp> (or tracetorch.hpp); one
/// that does not gets a static_assert saying so (compile_fail/nonfinite_target_without_sentinel.cpp).
class NonFiniteTarget {
 public:
  constexpr NonFiniteTarget() noexcept = default;
  constexpr NonFiniteTarget(std::nullptr_t) noexcept {}
  template <class Found>
    requires std::is_same_v<Found, std::optional<NonFinite>>
  NonFiniteTarget(Found* found) noexcept : found_(found) {  // NOLINT: implicit, `= &found` reads as the option
    constexpr bool served = requires { sizeof(detail::NonFiniteService<Found>); };
    static_assert(served, "find_nonfinite is served by the sentinel: #include <tracetorch/nonfinite.hpp>");
    if constexpr (served) runner_ = &detail::NonFiniteService<Found>::run;
  }
  /// The finding's place, or null where the option is not set.
  std::optional<NonFinite>* found() const noexcept { return found_; }
  operator std::optional<NonFinite>*() const noexcept { return found_; }
  /// What serves the request (the sentinel's entry point), for the traced forward.
  detail::NonFiniteRunner runner() const noexcept { return runner_; }

 private:
  std::optional<NonFinite>* found_ = nullptr;
  detail::NonFiniteRunner runner_ = nullptr;
};

/// What a caller asks of a forward, as transformers' keyword arguments; unset means "ask the
/// model's config" (a `config` member with the same names), else false.
struct OutputOptions {
  std::optional<LayerSelection> output_hidden_states;
  std::optional<bool> output_attentions;
  /// The record map's other keys, as upstream's `output_router_logits=True`:
  /// `.output = {{"router_logits", true}}`. A key no record map in the program declares is a
  /// tracetorch::Error when a capturing model sees it; a key given twice too.
  std::vector<OutputFlag> output;
  std::optional<bool> use_cache;
  std::optional<bool> return_dict;
  /// Trace this call with the model addition debugger, as upstream's `debug_io=True`: into
  /// `debug_io_dir` (default "model_debug"), pruned when `prune_layers` (default false, as
  /// upstream's None). The traced module needs nothing: its traced forward sees these keywords.
  std::optional<bool> debug_io;
  std::optional<std::string> debug_io_dir;
  std::optional<bool> prune_layers;
  /// Watch this call with the non-finite sentinel (<tracetorch/nonfinite.hpp>): `*find_nonfinite`
  /// is emptied, then holds the first module call whose outputs held NaN or Inf while its inputs
  /// were finite. As debug_io, read by the traced forward that takes these options; not a
  /// keyword of the trace.
  NonFiniteTarget find_nonfinite;
  /// The order the caller passed the options in, as Python's kwargs dict keeps it (names such as
  /// "output_attentions", "output_router_logits"): `tracetorch::output_options(kwargs)` fills it.
  /// A trace records these first, in this order, then any other option set, in declaration order.
  std::vector<std::string> call_order = {};
};

/// How `capture_outputs` finishes hidden_states.
struct CaptureSettings {
  /// Replace the last recorded hidden state by the output's (post-norm) last_hidden_state, as
  /// transformers does by default.
  bool tie_last_hidden_states = true;
};

/// Resolved output flags of one forward.
struct ResolvedOutputs {
  LayerSelection hidden_states = false;
  bool attentions = false;
  /// The model's other record keys that are asked for (`output_<key>`: the call's, else the
  /// config's, else false), in record-map order.
  std::vector<std::string_view> keys;
  /// Upstream's return_dict (call, else config, else true). A C++ forward returns its struct
  /// either way; where it is false, `to_tuple(out, model)` is what Python would have returned.
  bool return_dict = true;

  /// Whether record key `key` is asked for: cross_attentions (and mask_decoder_attentions) with
  /// attentions, as upstream.
  bool wants(std::string_view key) const {
    switch (detail::role_of(key)) {
      case detail::OutputRole::hidden_states: return hidden_states.any();
      case detail::OutputRole::attentions: return attentions;
      case detail::OutputRole::keyed: return std::find(keys.begin(), keys.end(), key) != keys.end();
    }
    return false;
  }
  /// Whether anything at all is asked for.
  bool any() const noexcept { return hidden_states.any() || attentions || !keys.empty(); }
};

namespace detail {

/// The call's `output_<key>` flag, if it gave one.
inline std::optional<bool> call_output_flag(const OutputOptions& options, std::string_view key) {
  for (const auto& flag : options.output) {
    if (flag.key.name() == key) return flag.value;
  }
  return std::nullopt;
}

/// `model.config.output_<Field>` through the reader TRACETORCH_OUTPUT declared for `Out`'s
/// field; None when the model has no config or the config lacks that member.
template <class Out, class Field, class Model>
std::optional<bool> config_output_flag(const Model& model) {
  if constexpr (requires { tracetorch_output_flag(static_cast<const Out*>(nullptr), typename Field::tag{}, model.config); }) {
    return flag_value(tracetorch_output_flag(static_cast<const Out*>(nullptr), typename Field::tag{}, model.config));
  } else {
    return std::nullopt;
  }
}

/// `Record`'s output_<key> flag: the call's, else the config's, else false.
template <class Out, class Record, class Model, class... Fields>
bool record_key_wanted(const Model& model, const OutputOptions& options, std::tuple<Fields...>*) {
  if (const auto from_call = call_output_flag(options, Record::field)) return *from_call;
  std::optional<bool> from_config;
  ((Fields::name == Record::field ? void(from_config = config_output_flag<Out, Fields>(model)) : void()), ...);
  return from_config.value_or(false);
}

/// The keys of `Model`'s record map beyond hidden_states and attentions that are asked for.
template <class Out, class Model>
void resolve_record_keys(const Model& model, const OutputOptions& options, ResolvedOutputs& resolved) {
  using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
  std::apply(
      [&](auto... record) {
        const auto add = [&]<class Record>(Record) {
          if constexpr (Record::role == OutputRole::keyed) {
            if (record_key_wanted<Out, Record>(model, options, static_cast<output_fields_t<Out>*>(nullptr))) {
              resolved.keys.push_back(Record::field);
            }
          }
        };
        (add(record), ...);
      },
      Records{});
}

/// resolve_output_options' default output struct: the return type of the model's forward.
struct deduce_output {};

template <class Model>
constexpr bool has_keyed_records() {
  if constexpr (requires { Model::can_record_outputs; }) {
    using Records = std::remove_cvref_t<decltype(Model::can_record_outputs)>;
    return []<class... R>(std::tuple<R...>*) { return ((R::role == OutputRole::keyed) || ... || false); }(
        static_cast<Records*>(nullptr));
  } else {
    return false;
  }
}

template <class Model>
auto deduced_output() {
  using Pointer = typename forward_pointer<Model>::type;
  if constexpr (!std::is_void_v<Pointer>) {
    using R = std::remove_cvref_t<typename member_function_result<Pointer>::type>;
    if constexpr (has_output_fields<R>) return std::type_identity<R>{};
    else return std::type_identity<void>{};
  } else {
    return std::type_identity<void>{};
  }
}

/// The output struct whose fields name the config flags of `Model`'s other record keys.
template <class Out, class Model>
auto model_output() {
  if constexpr (!std::is_same_v<Out, deduce_output>) {
    return std::type_identity<Out>{};
  } else {
    using Deduced = typename decltype(deduced_output<Model>())::type;
    static_assert(!std::is_void_v<Deduced> || !has_keyed_records<Model>(),
                  "tracetorch::resolve_output_options: the model's forward is overloaded or returns no "
                  "TRACETORCH_OUTPUT struct; name the output struct: resolve_output_options<Output>(model, options)");
    return std::type_identity<Deduced>{};
  }
}
template <class Out, class Model>
using model_output_t = typename decltype(model_output<Out, Model>())::type;

/// Each flag from the call's options, else the model's config, else its default. `Out`, the
/// output struct, names the config flags of the record map's other keys (void: none).
template <class Out, class Model>
ResolvedOutputs resolve_output_options(const Model& model, const OutputOptions& options) {
  ResolvedOutputs resolved;
  if (options.output_hidden_states) {
    resolved.hidden_states = *options.output_hidden_states;
  } else if (const auto from_config = config_flag(model, output_hidden_states_member)) {
    resolved.hidden_states = LayerSelection(*from_config);
  }
  resolved.attentions = options.output_attentions.value_or(config_flag(model, output_attentions_member).value_or(false));
  resolved.return_dict = options.return_dict.value_or(config_flag(model, return_dict_member).value_or(true));
  if constexpr (!std::is_void_v<Out> && requires { Model::can_record_outputs; }) {
    resolve_record_keys<Out>(model, options, resolved);
  }
  return resolved;
}

/// transformers' `@merge_with_config_defaults`: use_cache from the config unless given.
template <class Model>
OutputOptions merge_with_config_defaults(const Model& model, OutputOptions options) {
  if (!options.use_cache) options.use_cache = config_flag(model, use_cache_member);
  return options;
}

}  // namespace detail
}  // namespace tracetorch
