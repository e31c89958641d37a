#pragma once
/// \file
/// What a diff finds, value by value and call by call: the kinds of difference (what accept
/// rules name and the report counts), a value's status, one compared value, one missing call.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace tracetorch {

/// What kind of difference a mismatch is: how the report counts it and what an accept rule names.
enum class DiffKind {
  values,         ///< a tensor's numbers out of tolerance
  non_tensor,     ///< a non-tensor value (None, 3, 'text', a cache's repr) that differs
  shape,          ///< two tensors of different shapes
  structure,      ///< a tensor on one side and another value on the other, or printed values of another layout
  dtype,          ///< two tensors of different dtypes
  missing_value,  ///< a value of an aligned call recorded on one side only
  missing_call,   ///< a module call (and so all its values) on one side only
  order,          ///< a call present on both sides that ran in another order among its siblings
};

inline constexpr DiffKind kDiffKinds[] = {DiffKind::values,        DiffKind::non_tensor,   DiffKind::shape,
                                          DiffKind::structure,     DiffKind::dtype,        DiffKind::missing_value,
                                          DiffKind::missing_call,  DiffKind::order};

/// The name an accept rule uses: "values", "non-tensor", "shape", "structure", "dtype", "missing-value",
/// "missing-call", "order".
inline const char* to_string(DiffKind kind) {
  switch (kind) {
    case DiffKind::values: return "values";
    case DiffKind::non_tensor: return "non-tensor";
    case DiffKind::shape: return "shape";
    case DiffKind::structure: return "structure";
    case DiffKind::dtype: return "dtype";
    case DiffKind::missing_value: return "missing-value";
    case DiffKind::missing_call: return "missing-call";
    case DiffKind::order: return "order";
  }
  return "?";
}

/// What became of one tensor (or other recorded value) of an aligned call.
enum class DiffStatus {
  within_tolerance,
  out_of_tolerance,
  shape_mismatch,
  dtype_mismatch,
  value_mismatch,     ///< a non-tensor value (None, 3, 'text') that differs
  only_in_reference,  ///< the call, or this value of it, is missing from the candidate
  only_in_candidate,
  structure_mismatch,  ///< a tensor against another value, or printed values of another layout
  order_differs,       ///< not a value: this call ran in another order among its parent's calls
  /// Not compared, not a difference: a trace's file of this value holds another call's value
  /// (transformers' debugger keeps one file per module path; a repeated call overwrites it).
  overwritten,
};

inline const char* to_string(DiffStatus status) {
  switch (status) {
    case DiffStatus::within_tolerance: return "ok";
    case DiffStatus::out_of_tolerance: return "out of tolerance";
    case DiffStatus::shape_mismatch: return "shape mismatch";
    case DiffStatus::dtype_mismatch: return "dtype mismatch";
    case DiffStatus::value_mismatch: return "value mismatch";
    case DiffStatus::only_in_reference: return "only in reference";
    case DiffStatus::only_in_candidate: return "only in candidate";
    case DiffStatus::structure_mismatch: return "structure mismatch";
    case DiffStatus::order_differs: return "order differs";
    case DiffStatus::overwritten: return "overwritten";
  }
  return "?";
}

/// One compared value. Errors are of the candidate against the reference.
struct TensorDiff {
  std::string module_path;  ///< after renames
  std::size_t call = 1;     ///< 1 for the first call of this path, 2 for the second, ...
  std::string location;     ///< "inputs.args.0", "outputs", ... (the reference's, where it has the value)
  /// Set where the candidate records the value under another name (`inputs.args.0` for the
  /// reference's `inputs.kwargs.hidden_states`): a naming difference, not a divergence.
  std::string candidate_location;
  /// Set where an argument-name rule (`--arg-names`) decided this value's partner: an index into
  /// DiffReport::arg_names. Without one, args.N meets kwargs.NAME only by recorded position.
  std::optional<std::size_t> naming_rule;
  /// Where the recorded order alone would have found this value on the candidate's side, when
  /// the rule decided otherwise (another value, or none): the rule won, and the report says so.
  std::string order_location;
  DiffStatus status = DiffStatus::within_tolerance;
  bool is_tensor = true;
  bool printed = false;  ///< compared from printed values: precision limited to the printed digits
  bool call_missing = false;  ///< the whole call is on one side only (status only_in_*)
  bool from_file = false;     ///< a root output read from its file: the debugger leaves it out of the JSON
  std::string reference_shape, candidate_shape, reference_dtype, candidate_dtype;  ///< as the traces write them
  std::int64_t compared = 0;          ///< elements (a complex one's two parts; or printed numbers and stats) compared
  std::int64_t out_of_tolerance = 0;  ///< of those, how many break the tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;       ///< max |a - b| / |b| (inf where b = 0 and a != 0)
  double cosine_similarity = 1;   ///< of the two tensors as vectors (1 for two zero vectors)
  double tolerance_ratio = 0;     ///< max |a - b| / (atol + rtol * |b|): above 1 is out of tolerance
  double atol = 0, rtol = 0;      ///< the tolerance this pair was judged by (DiffOptions::precision_tolerance)
  std::optional<std::size_t> accepted_by;  ///< index into DiffReport::rules of the rule that accepts it
  /// Status overwritten: the call (1, 2, ...) of this path whose value the reference's (the
  /// candidate's) file holds instead; 0 where that side's value is its own.
  std::size_t reference_file_holds_call = 0, candidate_file_holds_call = 0;
  /// Status order_differs: the parent call among whose calls this one ran elsewhere ("path" or
  /// "path (call 2)"), and the parent's calls present on both sides in each trace's order,
  /// named below the parent ("gate_proj", "act_fn (call 2)").
  std::string order_parent;
  std::vector<std::string> reference_order, candidate_order;

  /// Something differs, accepted or not.
  bool mismatched() const { return kind().has_value(); }
  /// A difference no rule accepts: what makes the verdict (and the tool's exit status) fail.
  bool diverges() const { return mismatched() && !accepted_by; }
  bool naming_differs() const { return !candidate_location.empty(); }
  bool rule_over_order() const { return !order_location.empty(); }
  /// A bf16/fp16 tensor against one of another floating dtype: its numbers are compared (both
  /// widened to float64) and the dtype difference is reported apart, not as a mismatch.
  bool across_dtypes() const { return status != DiffStatus::dtype_mismatch && status != DiffStatus::overwritten && !reference_dtype.empty() &&
                                      !candidate_dtype.empty() && reference_dtype != candidate_dtype; }
  std::optional<DiffKind> kind() const {
    switch (status) {
      case DiffStatus::within_tolerance:
      case DiffStatus::overwritten: return std::nullopt;
      case DiffStatus::order_differs: return DiffKind::order;
      case DiffStatus::out_of_tolerance: return DiffKind::values;
      case DiffStatus::shape_mismatch: return DiffKind::shape;
      case DiffStatus::dtype_mismatch: return DiffKind::dtype;
      case DiffStatus::value_mismatch: return DiffKind::non_tensor;
      case DiffStatus::structure_mismatch: return DiffKind::structure;
      case DiffStatus::only_in_reference:
      case DiffStatus::only_in_candidate: return call_missing ? DiffKind::missing_call : DiffKind::missing_value;
    }
    return std::nullopt;
  }
  bool is_order() const { return status == DiffStatus::order_differs; }
  /// "M.f inputs.args.0 (call 2)", as `first divergence:` prints it; a call out of order: "M.f (call 2)".
  std::string where() const {
    return module_path + (location.empty() ? "" : " " + location) + (call > 1 ? " (call " + std::to_string(call) + ")" : "");
  }
};

/// A module call recorded on one side only.
struct CallDiff {
  std::string module_path;  ///< after renames
  std::size_t call = 1;
  bool in_reference = true;  ///< false: only in the candidate
  std::optional<std::size_t> accepted_by;

  std::string name() const { return call > 1 ? module_path + " (call " + std::to_string(call) + ")" : module_path; }
};

}  // namespace tracetorch
