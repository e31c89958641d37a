#pragma once
/// \file
/// The report of a diff: its values and missing calls, counted by kind and verdict, and summed
/// up per module (the worst-modules table). Its text and JSON forms: report_text.hpp, report_json.hpp.

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/diff/accept.hpp"
#include "tracetorch/diff/arg_names.hpp"
#include "tracetorch/diff/rename.hpp"
#include "tracetorch/diff/results.hpp"

namespace tracetorch {

/// The values and calls of one module path, summed up: the rows of the worst-modules table.
struct ModuleDiff {
  std::string module_path;
  std::size_t tensors = 0, other_values = 0;  ///< values recorded (on either side)
  std::size_t diverging = 0;                  ///< of those, how many diverge (not accepted), any kind
  std::size_t accepted = 0;                   ///< differences accepted by a rule
  std::size_t non_tensor_mismatches = 0, structural_mismatches = 0, values_on_one_side = 0;  ///< not accepted
  std::size_t calls_out_of_order = 0;  ///< not accepted: this path's calls that ran in another order among their siblings
  std::size_t overwritten = 0;         ///< values not compared: a trace's file holds another call's value
  std::size_t calls_only_in_reference = 0, calls_only_in_candidate = 0;  ///< not accepted
  std::size_t accepted_calls_only_in_reference = 0, accepted_calls_only_in_candidate = 0;
  std::int64_t compared = 0, out_of_tolerance = 0;
  double max_abs_error = 0, max_rel_error = 0, min_cosine_similarity = 1, tolerance_ratio = 0;

  bool diverges() const { return diverging > 0 || calls_only_in_reference > 0 || calls_only_in_candidate > 0; }
  /// What the numbers do not show: "call only in candidate; 1 non-tensor value differs; 2 accepted".
  std::string note() const;
};

/// Every difference, counted by kind (accepted ones included) and by verdict.
struct DiffCounts {
  std::size_t tensors = 0, other_values = 0;  ///< values of aligned calls (either side)
  std::size_t by_kind[std::size(kDiffKinds)] = {};  ///< indexed by DiffKind; missing_call counts calls, not their values
  std::size_t values_only_in_reference = 0, values_only_in_candidate = 0;
  std::size_t calls_only_in_reference = 0, calls_only_in_candidate = 0;
  std::size_t naming = 0;  ///< values aligned across args.N / kwargs.NAME (not differences)
  std::size_t naming_by_rule = 0;   ///< of those, aligned by an argument-name rule (the rest by position)
  std::size_t rule_over_order = 0;  ///< values an argument-name rule paired otherwise than the recorded order would
  std::size_t across_dtypes = 0;  ///< tensors compared across dtypes, bf16 against fp32 (not differences)
  /// Values not compared because that side's file holds another call's value (a Python trace's
  /// repeated call overwrote it): not differences. A value overwritten on both sides counts in both.
  std::size_t overwritten_in_reference = 0, overwritten_in_candidate = 0;
  std::size_t accepted = 0, not_accepted = 0;

  std::size_t of(DiffKind kind) const { return by_kind[static_cast<std::size_t>(kind)]; }
  std::size_t total() const { return accepted + not_accepted; }
};

struct DiffReport {
  std::filesystem::path reference_file, candidate_file;
  std::string reference_values, candidate_values;  ///< "safetensors", "printed", "mixed", "none"
  double atol = 0, rtol = 0;
  bool precision_tolerance = true;  ///< DiffOptions::precision_tolerance
  std::vector<PathRename> renames;
  std::vector<AcceptRule> rules;  ///< DiffOptions::accept, each with its `matched` count
  std::vector<ArgNamesRule> arg_names;  ///< DiffOptions::arg_names, each with its `calls` and `matched` counts
  std::vector<std::string> notes;  ///< what was not compared, and why
  std::size_t reference_calls = 0, candidate_calls = 0;
  /// Every compared value and every call out of order (TensorDiff::is_order), in execution
  /// order: the reference's, with what the candidate records alone where the candidate ran it.
  std::vector<TensorDiff> tensors;
  std::vector<CallDiff> missing_calls;  ///< in the same order
  std::vector<std::string> only_in_reference, only_in_candidate;  ///< module calls, "path" or "path (call 2)"
  std::optional<std::size_t> first_divergence;  ///< index into tensors: the first value (or call out of order) that diverges

  DiffCounts counts() const;
  /// No difference that a rule does not accept: the tool exits 0.
  bool within_tolerance() const { return counts().not_accepted == 0; }
  bool precision_limited() const {
    return std::any_of(tensors.begin(), tensors.end(), [](const TensorDiff& t) { return t.printed; });
  }
  std::vector<const AcceptRule*> stale_rules() const {
    std::vector<const AcceptRule*> out;
    for (const auto& rule : rules) {
      if (rule.matched == 0) out.push_back(&rule);
    }
    return out;
  }
  /// Argument-name rules that decided no value's partner.
  std::vector<const ArgNamesRule*> stale_arg_names() const {
    std::vector<const ArgNamesRule*> out;
    for (const auto& rule : arg_names) {
      if (rule.matched == 0) out.push_back(&rule);
    }
    return out;
  }

  /// Module paths, those that diverge first, by how far their worst tensor is beyond the
  /// tolerance (a structural or non-tensor mismatch, or a missing call, ranks above any number).
  std::vector<ModuleDiff> modules() const;

  /// The human-readable report: the verdict, `first divergence: <path> <location>`, every
  /// kind of difference counted, accepted differences with their reasons, stale rules, the
  /// worst modules; with `all`, a line per compared value.
  std::string text(bool all = false, std::size_t worst = 10) const;

  /// The report as JSON (non-finite numbers as the strings "inf", "-inf", "nan").
  boost::json::object json() const;
};

namespace detail {

/// A number as the report's text writes it: printf's `format`, "inf", "-inf" or "nan".
inline std::string number_text(double v, const char* format = "%.3e") {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

/// A number for the JSON report: non-finite ones as the strings "inf", "-inf", "nan".
inline boost::json::value number_json(double v) {
  if (std::isfinite(v)) return v;
  return boost::json::string(number_text(v));
}

/// The first value that diverges (no rule accepts its difference), if any.
inline std::optional<std::size_t> first_divergence(const std::vector<TensorDiff>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].diverges()) return i;
  }
  return std::nullopt;
}

}  // namespace detail

inline DiffCounts DiffReport::counts() const {
  DiffCounts out;
  for (const auto& t : tensors) {
    if (t.call_missing) continue;  // counted once, as its call
    if (t.is_order()) {  // a call, not a value
      ++out.by_kind[static_cast<std::size_t>(DiffKind::order)];
      ++(t.accepted_by ? out.accepted : out.not_accepted);
      continue;
    }
    ++(t.is_tensor ? out.tensors : out.other_values);
    if (t.status == DiffStatus::overwritten) {
      out.overwritten_in_reference += t.reference_file_holds_call > 0 ? 1 : 0;
      out.overwritten_in_candidate += t.candidate_file_holds_call > 0 ? 1 : 0;
    }
    out.naming += t.naming_differs() ? 1 : 0;
    out.naming_by_rule += t.naming_differs() && t.naming_rule ? 1 : 0;
    out.rule_over_order += t.rule_over_order() ? 1 : 0;
    out.across_dtypes += t.is_tensor && t.across_dtypes() ? 1 : 0;
    const auto kind = t.kind();
    if (!kind) continue;
    ++out.by_kind[static_cast<std::size_t>(*kind)];
    out.values_only_in_reference += t.status == DiffStatus::only_in_reference ? 1 : 0;
    out.values_only_in_candidate += t.status == DiffStatus::only_in_candidate ? 1 : 0;
    ++(t.accepted_by ? out.accepted : out.not_accepted);
  }
  for (const auto& c : missing_calls) {
    ++out.by_kind[static_cast<std::size_t>(DiffKind::missing_call)];
    ++(c.in_reference ? out.calls_only_in_reference : out.calls_only_in_candidate);
    ++(c.accepted_by ? out.accepted : out.not_accepted);
  }
  return out;
}

inline std::string ModuleDiff::note() const {
  std::vector<std::string> parts;
  const auto count = [](std::size_t n, const char* one, const char* many) {
    return n == 1 ? std::string(one) : std::to_string(n) + " " + many;
  };
  if (calls_only_in_reference > 0) parts.push_back(count(calls_only_in_reference, "call only in reference", "calls only in reference"));
  if (calls_only_in_candidate > 0) parts.push_back(count(calls_only_in_candidate, "call only in candidate", "calls only in candidate"));
  if (values_on_one_side > 0) parts.push_back(count(values_on_one_side, "1 value on one side only", "values on one side only"));
  if (non_tensor_mismatches > 0) parts.push_back(count(non_tensor_mismatches, "1 non-tensor value differs", "non-tensor values differ"));
  if (structural_mismatches > 0) parts.push_back(count(structural_mismatches, "1 shape/dtype/structure mismatch", "shape/dtype/structure mismatches"));
  if (calls_out_of_order > 0) parts.push_back(count(calls_out_of_order, "call out of order", "calls out of order"));
  if (overwritten > 0) parts.push_back(count(overwritten, "1 value overwritten in a trace, not compared", "values overwritten in a trace, not compared"));
  // An accepted missing call is still said to be missing: the table must not read as a match.
  if (accepted_calls_only_in_reference > 0) parts.push_back("call only in reference, accepted");
  if (accepted_calls_only_in_candidate > 0) parts.push_back("call only in candidate, accepted");
  const std::size_t accepted_values = accepted - accepted_calls_only_in_reference - accepted_calls_only_in_candidate;
  if (accepted_values > 0) parts.push_back(count(accepted_values, "1 value difference accepted", "value differences accepted"));
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : "; ") + part;
  return out;
}

inline std::vector<ModuleDiff> DiffReport::modules() const {
  std::vector<ModuleDiff> out;
  std::map<std::string, std::size_t> index;
  const auto row = [&](const std::string& path) -> ModuleDiff& {
    auto [it, inserted] = index.emplace(path, out.size());
    if (inserted) out.push_back({path});
    return out[it->second];
  };
  const auto nan_max = [](double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); };
  for (const auto& t : tensors) {
    auto& m = row(t.module_path);
    if (!t.is_order()) ++(t.is_tensor ? m.tensors : m.other_values);
    m.overwritten += t.status == DiffStatus::overwritten ? 1 : 0;
    m.diverging += t.diverges() ? 1 : 0;
    m.accepted += t.mismatched() && t.accepted_by && !t.call_missing ? 1 : 0;
    m.compared += t.compared;
    m.out_of_tolerance += t.out_of_tolerance;
    m.max_abs_error = nan_max(m.max_abs_error, t.max_abs_error);
    m.max_rel_error = nan_max(m.max_rel_error, t.max_rel_error);
    m.tolerance_ratio = nan_max(m.tolerance_ratio, t.tolerance_ratio);
    if (t.compared > 0) m.min_cosine_similarity = std::isnan(t.cosine_similarity) ? t.cosine_similarity
                                                   : std::min(m.min_cosine_similarity, t.cosine_similarity);
    if (!t.diverges()) continue;
    const auto kind = *t.kind();
    m.non_tensor_mismatches += kind == DiffKind::non_tensor ? 1 : 0;
    m.structural_mismatches += kind == DiffKind::shape || kind == DiffKind::dtype || kind == DiffKind::structure ? 1 : 0;
    m.values_on_one_side += kind == DiffKind::missing_value ? 1 : 0;
    m.calls_out_of_order += kind == DiffKind::order ? 1 : 0;
    // Structural and non-tensor mismatches, and missing values, rank above any numeric error.
    if (kind != DiffKind::values) m.tolerance_ratio = HUGE_VAL;
  }
  for (const auto& c : missing_calls) {
    auto& m = row(c.module_path);
    if (c.accepted_by) {
      ++m.accepted;
      ++(c.in_reference ? m.accepted_calls_only_in_reference : m.accepted_calls_only_in_candidate);
      continue;
    }
    ++(c.in_reference ? m.calls_only_in_reference : m.calls_only_in_candidate);
    m.tolerance_ratio = HUGE_VAL;
  }
  std::stable_sort(out.begin(), out.end(), [](const ModuleDiff& a, const ModuleDiff& b) {
    const auto key = [](const ModuleDiff& m) { return std::isnan(m.tolerance_ratio) ? HUGE_VAL : m.tolerance_ratio; };
    return std::make_pair(a.diverges(), key(a)) > std::make_pair(b.diverges(), key(b));
  });
  return out;
}

}  // namespace tracetorch
