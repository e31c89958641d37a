#pragma once
/// \file
/// What the non-finite sentinel found: a module call and one of its values holding NaN or Inf,
/// and the one line that names it. No LibTorch here: OutputOptions carries a pointer to it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tracetorch {

/// The first module call whose outputs held NaN or Inf while its inputs were finite, or the
/// root's own inputs where those were not finite already (`in_root_inputs`).
struct NonFinite {
  /// The module path as a trace names it: `LlamaModel.layers.1.mlp.down_proj`.
  std::string module_path;
  /// Which call of that path in its forward, counted from 1 as the debugger's `_call2` files
  /// and tracetorch-diff's `(call 2)` count.
  int call = 1;
  /// The value, as tracetorch-diff names a value's place in its call: `outputs` (the result
  /// itself), `outputs.0` (element 0 of a tuple or list), `outputs.last_hidden_state` (a field
  /// of an output struct), `outputs.hidden_states.2`; for the root's inputs `inputs.args.0` or
  /// `inputs.kwargs.inputs_embeds`.
  std::string location;
  /// true: the root was called with this non-finite input, so no module made it.
  bool in_root_inputs = false;
  std::int64_t nan = 0;
  std::int64_t positive_inf = 0;
  std::int64_t negative_inf = 0;
  /// The value's number of elements (of a complex tensor: real and imaginary parts counted
  /// apart, two per element).
  std::int64_t elements = 0;
  /// Inputs of the call that it changed in place (their version moved while it ran): their
  /// values on entry are unknown, and were taken as finite.
  std::vector<std::string> changed_in_place;

  /// `first non-finite: PATH (call K) LOCATION: N of M elements NaN`, see nonfinite_message.
  std::string message() const;
};

/// The line a program prints:
/// `first non-finite: LlamaModel.layers.1.mlp.down_proj (call 1) outputs: 3 of 64 elements NaN`.
/// Each kind present is listed, in the order NaN, +Inf, -Inf, as `N of M elements KIND`,
/// separated by ", ". A root input ends with `, already in the root's inputs`; an input changed
/// in place with `; changed in place by the call, unchecked on entry: LOCATION[, LOCATION]`.
inline std::string nonfinite_message(const NonFinite& found) {
  std::string line = "first non-finite: " + found.module_path + " (call " + std::to_string(found.call) + ") " +
                     found.location + ": ";
  const std::string of = " of " + std::to_string(found.elements) + " elements ";
  const std::pair<std::int64_t, const char*> kinds[] = {
      {found.nan, "NaN"}, {found.positive_inf, "+Inf"}, {found.negative_inf, "-Inf"}};
  bool first = true;
  for (const auto& [count, kind] : kinds) {
    if (count == 0) continue;
    if (!first) line += ", ";
    line += std::to_string(count) + of + kind;
    first = false;
  }
  if (found.in_root_inputs) line += ", already in the root's inputs";
  if (!found.changed_in_place.empty()) {
    line += "; changed in place by the call, unchecked on entry: ";
    for (std::size_t i = 0; i < found.changed_in_place.size(); ++i) {
      line += (i == 0 ? "" : ", ") + found.changed_in_place[i];
    }
  }
  return line;
}

inline std::string NonFinite::message() const { return nonfinite_message(*this); }

}  // namespace tracetorch
