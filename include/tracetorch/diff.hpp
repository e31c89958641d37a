#pragma once
/// \file
/// Comparing two traces of the model addition debugger, module by module: where does a port
/// first diverge from its reference? The library behind `tracetorch-diff`.
///
/// \code
/// auto report = tracetorch::diff_traces("python_trace", "cpp_trace", {.atol = 1e-5, .rtol = 1e-4});
/// if (!report.within_tolerance()) std::cout << report.text();  // "first divergence: ..."
/// \endcode
///
/// A trace is a directory holding `<Root>_debug_tree_FULL_TENSORS.json` (or that file), made
/// by tracetorch or by transformers' `model_addition_debugger_context` in Python. Calls are
/// aligned by module path (after the renames in DiffOptions::renames) and by call order: the
/// k-th call of a path on one side meets the k-th call of that path on the other. Tensors of
/// a call are aligned by their place in it (`inputs.args.0`, `outputs.1`).
///
/// With `use_repr=false` traces (one `.safetensors` file per tensor) the tensors themselves are
/// compared, one pair in memory at a time. With `use_repr=true` traces only the printed
/// values exist (Python's `print(tensor)`: 4 significant digits, edge items only for tensors
/// of more than 1000 elements) and the mean/std/min/max lines: those are compared, each
/// tolerance widened by half a unit in the last printed digit of both numbers, so precision
/// is limited to the printed digits. One side of each kind works too: the file's tensor is
/// printed as Python would print it and compared as printed.
///
/// Every difference has a DiffKind and is counted; reviewed ones can be accepted by rules
/// (AcceptRule: reported with their reason, not failing). A call present on both sides that
/// ran in another order among its siblings is a difference too (DiffKind::order: g++ evaluates
/// `a(x) * b(x)` right to left). A value that a trace's file does not hold (transformers keeps
/// one file per module path, so a repeated call overwrites the earlier calls' files) is counted
/// as overwritten, not compared, and not failing. A value passed as `args.N` on one side
/// and `kwargs.NAME` on the other is aligned by an argument-name rule (ArgNamesRule) where one
/// names it, else by its position among the call's inputs; a bf16 or
/// fp16 tensor against an fp32 one is compared at the lower precision's tolerance. The root's
/// outputs, left out of the JSON by the debugger, are read from their files.
///
/// The parts: in detail/trace_format/, format.hpp (the trace format's names), reader.hpp
/// (reading a trace), overwritten_files.hpp (files several values name); in detail/diff/,
/// align.hpp (aligning two), execution_order.hpp (one order for both, calls out of order),
/// compare.hpp (comparing aligned values); in tracetorch/diff/, the types a user names:
/// accept.hpp (accept rules), arg_names.hpp (argument-name rules), rules_file.hpp (the rules
/// files' lines and globs), rename.hpp (--map), results.hpp and report*.hpp (what a diff
/// finds, and its text and JSON forms).

#include <torch/torch.h>

#include <boost/json.hpp>
#include <re2/re2.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tracetorch/detail/fs/atomic_file.hpp"
#include "tracetorch/diff/accept.hpp"
#include "tracetorch/detail/diff/align.hpp"
#include "tracetorch/diff/arg_names.hpp"
#include "tracetorch/detail/diff/compare.hpp"
#include "tracetorch/detail/diff/execution_order.hpp"
#include "tracetorch/detail/trace_format/overwritten_files.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/diff/rename.hpp"
#include "tracetorch/diff/report.hpp"
#include "tracetorch/diff/report_json.hpp"
#include "tracetorch/diff/report_text.hpp"
#include "tracetorch/diff/results.hpp"
#include "tracetorch/detail/trace_format/tensor_files.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/python_repr.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch {

struct DiffOptions {
  /// Elements a (candidate) and b (reference) agree when |a - b| <= atol + rtol * |b|
  /// (numpy's allclose); NaN agrees with NaN at the same place, inf with the same inf.
  double atol = 1e-5;
  double rtol = 1e-4;
  /// Applied in order to every module path of both traces.
  std::vector<PathRename> renames;
  /// Called after each compared tensor with (done, total); for a progress line.
  std::function<void(std::size_t, std::size_t)> progress;
  /// Reviewed known differences; the first rule (in order) that matches a difference accepts it.
  std::vector<AcceptRule> accept;
  /// Which keyword each positional argument is, per module (`--arg-names`); the first rule (in
  /// order) that matches a call's path applies. Without one, args.N meets kwargs.NAME by position.
  std::vector<ArgNamesRule> arg_names;
  /// A pair whose lower precision is bfloat16 or float16 is judged by at least twice that
  /// dtype's epsilon as atol and rtol (bf16: 2^-6 = 1.5625e-2, fp16: 2^-9 = 1.953e-3): a bf16
  /// reference cannot hold a port to fp32's 1e-4. Off: every pair by atol and rtol alone.
  bool precision_tolerance = true;
};

/// Reads an accept rules file (see AcceptRule and parse_accept_rules); throws Error naming the
/// file, and the line of a bad rule.
inline std::vector<AcceptRule> load_accept_rules(const std::filesystem::path& path) {
  return parse_accept_rules(detail::rules_file::read(path), path.string());
}
/// Reads an argument-name rules file (see ArgNamesRule and parse_arg_names_rules); the same errors.
inline std::vector<ArgNamesRule> load_arg_names_rules(const std::filesystem::path& path) {
  return parse_arg_names_rules(detail::rules_file::read(path), path.string());
}

/// Compares the candidate trace against the reference trace. Throws Error (naming the file)
/// for a trace that cannot be read or is malformed, including any tensor file it names.
///
/// \code
/// tracetorch::DiffOptions options;
/// options.renames.push_back(tracetorch::PathRename::parse(R"(^Model\.blocks\.=>LlamaModel.layers.)"));
/// options.accept = tracetorch::load_accept_rules("reviewed.txt");
/// const auto report = tracetorch::diff_traces("python_trace", "cpp_trace", options);
/// if (report.first_divergence) std::cout << report.tensors[*report.first_divergence].where() << "\n";
/// \endcode
inline DiffReport diff_traces(const std::filesystem::path& reference, const std::filesystem::path& candidate,
                              const DiffOptions& options = {}) {
  // Each trace is read under its directory's shared lock, from its JSON to its last tensor
  // file: a trace the debugger publishes meanwhile is seen whole, before or after.
  const auto reference_lock = detail::lock_trace_for_reading(reference);
  const auto candidate_lock = detail::lock_trace_for_reading(candidate);
  auto ref = detail::parse_trace_file(detail::resolve_trace_path(reference));
  auto cand = detail::parse_trace_file(detail::resolve_trace_path(candidate));
  detail::mark_overwritten_values(ref);
  detail::mark_overwritten_values(cand);

  DiffReport report;
  report.reference_file = ref.json_file;
  report.candidate_file = cand.json_file;
  report.atol = options.atol;
  report.rtol = options.rtol;
  report.precision_tolerance = options.precision_tolerance;
  report.renames = options.renames;
  report.rules = options.accept;
  for (auto& rule : report.rules) rule.matched = 0;
  report.arg_names = options.arg_names;
  for (auto& rule : report.arg_names) rule.calls = rule.matched = 0;
  report.reference_calls = ref.calls.size();
  report.candidate_calls = cand.calls.size();
  if (auto note = detail::include_root_outputs(ref, cand)) report.notes.push_back(std::move(*note));
  report.reference_values = detail::values_kind(ref);
  report.candidate_values = detail::values_kind(cand);

  const auto rename = detail::path_renamer(options.renames);
  if (auto note = detail::different_roots(ref, cand, rename)) report.notes.push_back(std::move(*note));
  auto alignment = detail::align_traces(ref, cand, rename, report.arg_names);
  report.missing_calls = std::move(alignment.missing_calls);
  for (const auto& call : report.missing_calls) (call.in_reference ? report.only_in_reference : report.only_in_candidate).push_back(call.name());
  report.tensors = detail::compare_aligned(ref, cand, alignment.values, {options.atol, options.rtol, options.precision_tolerance},
                                           options.progress);
  detail::apply_accept_rules(report.rules, report.tensors, report.missing_calls);
  report.first_divergence = detail::first_divergence(report.tensors);
  return report;
}

/// Writes `report.json()` to `path` (complete or not at all); throws Error naming the path.
inline void write_diff_report(const DiffReport& report, const std::filesystem::path& path) {
  detail::AtomicFileWriter writer(path);
  writer.write(boost::json::serialize(report.json()));
  writer.write("\n");
  writer.commit();
}

}  // namespace tracetorch
