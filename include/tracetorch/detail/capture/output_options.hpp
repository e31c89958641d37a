#pragma once
/// \file
/// What a caller asks of a forward (OutputOptions, transformers' keyword arguments) and how it
/// resolves against the model's config: one owner for the options and their defaults.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/capture/config_flag.hpp"
#include "tracetorch/detail/error.hpp"

namespace tracetorch {

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
  /// Upstream's return_dict (call, else config, else true). A C++ forward returns its struct
  /// either way; where it is false, `to_tuple(out, model)` is what Python would have returned.
  bool return_dict = true;
};

namespace detail {

/// Each flag from the call's options, else the model's config, else its default.
template <class Model>
ResolvedOutputs resolve_output_options(const Model& model, const OutputOptions& options) {
  ResolvedOutputs resolved;
  if (options.output_hidden_states) {
    resolved.hidden_states = *options.output_hidden_states;
  } else if (const auto from_config = config_flag(model, output_hidden_states_member)) {
    resolved.hidden_states = LayerSelection(*from_config);
  }
  resolved.attentions = options.output_attentions.value_or(config_flag(model, output_attentions_member).value_or(false));
  resolved.return_dict = options.return_dict.value_or(config_flag(model, return_dict_member).value_or(true));
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
