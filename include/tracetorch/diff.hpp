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
/// (AcceptRule: reported with their reason, not failing). A value passed as `args.N` on one side
/// and `kwargs.NAME` on the other is aligned by its position among the call's inputs; a bf16 or
/// fp16 tensor against an fp32 one is compared at the lower precision's tolerance. The root's
/// outputs, left out of the JSON by the debugger, are read from their files.

#include <torch/torch.h>

#include <boost/json.hpp>
#include <re2/re2.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "tracetorch/detail/io/atomic_file.hpp"
#include "tracetorch/detail/trace_reader.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/python_repr.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch {

/// One `--map 'REGEX=>REPLACEMENT'`: module paths are rewritten (every match, `$1` for groups,
/// `$&` for the match, `$$` for a dollar) on both sides before alignment, so a port whose
/// modules are named differently (`Model.blocks.3`) can meet its reference (`LlamaModel.layers.3`).
/// Patterns are RE2: Python's syntax, linear time whatever the path's length.
struct PathRename {
  std::string pattern;
  std::string replacement;

  /// Splits "REGEX=>REPLACEMENT" at the first "=>"; throws Error for a missing "=>", a bad
  /// pattern or a replacement naming a group the pattern does not have.
  static PathRename parse(std::string_view spec) {
    const auto arrow = spec.find("=>");
    if (arrow == std::string_view::npos) {
      throw Error("tracetorch: --map " + std::string(spec) + ": expected 'REGEX=>REPLACEMENT'");
    }
    PathRename rename{std::string(spec.substr(0, arrow)), std::string(spec.substr(arrow + 2))};
    const auto compiled = rename.compiled();  // validates now, not at the first path
    if (std::string error; !compiled->CheckRewriteString(rename.rewrite(), &error)) {
      throw Error("tracetorch: --map " + std::string(spec) + ": " + error);
    }
    return rename;
  }

  std::shared_ptr<const re2::RE2> compiled() const {
    auto compiled = std::make_shared<const re2::RE2>(pattern, re2::RE2::Quiet);
    if (!compiled->ok()) {
      throw Error("tracetorch: --map " + pattern + "=>" + replacement + ": invalid regex: " + compiled->error());
    }
    return compiled;
  }

  /// The replacement in RE2's rewrite syntax (`\1`, `\0`, `\\`).
  std::string rewrite() const {
    std::string out;
    for (std::size_t i = 0; i < replacement.size(); ++i) {
      const char c = replacement[i];
      const char next = i + 1 < replacement.size() ? replacement[i + 1] : '\0';
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '$' && next >= '0' && next <= '9') {
        out += '\\';
        out += next;
        ++i;
      } else if (c == '$' && next == '&') {
        out += "\\0";
        ++i;
      } else if (c == '$' && next == '$') {
        out += '$';
        ++i;
      } else {
        out += c;
      }
    }
    return out;
  }
};

/// What kind of difference a mismatch is: how the report counts it and what an accept rule names.
enum class DiffKind {
  values,         ///< a tensor's numbers out of tolerance
  non_tensor,     ///< a non-tensor value (None, 3, 'text', a cache's repr) that differs
  shape,          ///< two tensors of different shapes
  structure,      ///< a tensor on one side and another value on the other, or printed values of another layout
  dtype,          ///< two tensors of different dtypes
  missing_value,  ///< a value of an aligned call recorded on one side only
  missing_call,   ///< a module call (and so all its values) on one side only
};

inline constexpr DiffKind kDiffKinds[] = {DiffKind::values,    DiffKind::non_tensor,    DiffKind::shape,       DiffKind::structure,
                                          DiffKind::dtype,     DiffKind::missing_value, DiffKind::missing_call};

/// The name an accept rule uses: "values", "non-tensor", "shape", "structure", "dtype", "missing-value", "missing-call".
inline const char* to_string(DiffKind kind) {
  switch (kind) {
    case DiffKind::values: return "values";
    case DiffKind::non_tensor: return "non-tensor";
    case DiffKind::shape: return "shape";
    case DiffKind::structure: return "structure";
    case DiffKind::dtype: return "dtype";
    case DiffKind::missing_value: return "missing-value";
    case DiffKind::missing_call: return "missing-call";
  }
  return "?";
}

/// One reviewed, known difference (`tracetorch-diff --accept FILE`, one rule a line):
///
///     # PATTERN                                           KIND        REASON
///     LlamaModel.layers.*.self_attn:inputs.kwargs.past_key_values  non-tensor  the port's cache prints another repr
///     LlamaModel.rotary_emb                               missing-call  the port computes the rotary table inline
///
/// PATTERN is MODULE or MODULE:VALUE, globs (`*` any run of characters, dots included; `?` one
/// character) over the module path (after --map) and the value's place in the call; KIND is one
/// of DiffKind's names; REASON, the rest of the line, is required. A matching difference is
/// reported as accepted with its reason and does not count as a divergence.
struct AcceptRule {
  std::string file;       ///< where the rule was written, for messages
  std::size_t line = 0;
  std::string module_pattern;
  std::string value_pattern;  ///< empty: any value of the module's calls
  DiffKind kind = DiffKind::values;
  std::string reason;
  std::size_t matched = 0;  ///< in a DiffReport's copy: how many differences it accepted (0: a stale rule)

  std::string origin() const { return file + ":" + std::to_string(line); }
  std::string pattern() const { return value_pattern.empty() ? module_pattern : module_pattern + ":" + value_pattern; }
};

/// Parses a rules file's text (see AcceptRule); throws Error "FILE:LINE: what is wrong".
inline std::vector<AcceptRule> parse_accept_rules(std::string_view text, const std::string& file_name);

/// Reads and parses a rules file; throws Error naming the file (and the line).
inline std::vector<AcceptRule> load_accept_rules(const std::filesystem::path& path);

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
  /// A pair whose lower precision is bfloat16 or float16 is judged by at least twice that
  /// dtype's epsilon as atol and rtol (bf16: 2^-6 = 1.5625e-2, fp16: 2^-9 = 1.953e-3): a bf16
  /// reference cannot hold a port to fp32's 1e-4. Off: every pair by atol and rtol alone.
  bool precision_tolerance = true;
};

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
  DiffStatus status = DiffStatus::within_tolerance;
  bool is_tensor = true;
  bool printed = false;  ///< compared from printed values: precision limited to the printed digits
  bool call_missing = false;  ///< the whole call is on one side only (status only_in_*)
  bool from_file = false;     ///< a root output read from its file: the debugger leaves it out of the JSON
  std::string reference_shape, candidate_shape, reference_dtype, candidate_dtype;  ///< as the traces write them
  std::int64_t compared = 0;          ///< elements (or printed numbers and stats) compared
  std::int64_t out_of_tolerance = 0;  ///< of those, how many break the tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;       ///< max |a - b| / |b| (inf where b = 0 and a != 0)
  double cosine_similarity = 1;   ///< of the two tensors as vectors (1 for two zero vectors)
  double tolerance_ratio = 0;     ///< max |a - b| / (atol + rtol * |b|): above 1 is out of tolerance
  double atol = 0, rtol = 0;      ///< the tolerance this pair was judged by (DiffOptions::precision_tolerance)
  std::optional<std::size_t> accepted_by;  ///< index into DiffReport::rules of the rule that accepts it

  /// Something differs, accepted or not.
  bool mismatched() const { return status != DiffStatus::within_tolerance; }
  /// A difference no rule accepts: what makes the verdict (and the tool's exit status) fail.
  bool diverges() const { return mismatched() && !accepted_by; }
  bool naming_differs() const { return !candidate_location.empty(); }
  /// A bf16/fp16 tensor against one of another floating dtype: its numbers are compared (both
  /// widened to float64) and the dtype difference is reported apart, not as a mismatch.
  bool across_dtypes() const { return status != DiffStatus::dtype_mismatch && !reference_dtype.empty() &&
                                      !candidate_dtype.empty() && reference_dtype != candidate_dtype; }
  std::optional<DiffKind> kind() const {
    switch (status) {
      case DiffStatus::within_tolerance: return std::nullopt;
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
  /// "inputs.args.0" for tensors, as `first divergence:` prints it.
  std::string where() const { return module_path + " " + location + (call > 1 ? " (call " + std::to_string(call) + ")" : ""); }
};

/// A module call recorded on one side only.
struct CallDiff {
  std::string module_path;  ///< after renames
  std::size_t call = 1;
  bool in_reference = true;  ///< false: only in the candidate
  std::optional<std::size_t> accepted_by;

  std::string name() const { return call > 1 ? module_path + " (call " + std::to_string(call) + ")" : module_path; }
};

/// The values and calls of one module path, summed up: the rows of the worst-modules table.
struct ModuleDiff {
  std::string module_path;
  std::size_t tensors = 0, other_values = 0;  ///< values recorded (on either side)
  std::size_t diverging = 0;                  ///< of those, how many diverge (not accepted), any kind
  std::size_t accepted = 0;                   ///< differences accepted by a rule
  std::size_t non_tensor_mismatches = 0, structural_mismatches = 0, values_on_one_side = 0;  ///< not accepted
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
  std::size_t across_dtypes = 0;  ///< tensors compared across dtypes, bf16 against fp32 (not differences)
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
  std::vector<std::string> notes;  ///< what was not compared, and why
  std::size_t reference_calls = 0, candidate_calls = 0;
  std::vector<TensorDiff> tensors;  ///< in execution order (the reference's; the candidate's extra calls last)
  std::vector<CallDiff> missing_calls;  ///< in the same order
  std::vector<std::string> only_in_reference, only_in_candidate;  ///< module calls, "path" or "path (call 2)"
  std::optional<std::size_t> first_divergence;  ///< index into tensors: the first value that diverges

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

/// Running error statistics of one tensor pair.
struct ErrorAccumulator {
  double atol, rtol;
  std::int64_t compared = 0, out_of_tolerance = 0;
  double max_abs = 0, max_rel = 0, ratio = 0, dot = 0, norm_a = 0, norm_b = 0;
  bool nan_error = false;

  /// `slack` widens the tolerance of each element (printed values: half a unit in the last digit of each).
  void add(double a, double b, double slack = 0) {
    ++compared;
    if (a == b || (std::isnan(a) && std::isnan(b))) return;  // equal infinities and NaNs included
    const double error = std::fabs(a - b);
    const double tolerance = atol + rtol * std::fabs(b) + slack;
    if (!(error <= tolerance)) ++out_of_tolerance;
    if (std::isnan(error)) {
      nan_error = true;
    } else {
      max_abs = std::max(max_abs, error);
      if (error > 0) {
        max_rel = std::max(max_rel, b == 0 ? HUGE_VAL : error / std::fabs(b));
        ratio = std::max(ratio, tolerance == 0 ? HUGE_VAL : error / tolerance);
      }
    }
  }
  /// Non-finite pairs (a mask's -inf) are left out of the cosine; add() has judged them.
  void add_vector_terms(double a, double b) {
    if (!std::isfinite(a) || !std::isfinite(b)) return;
    dot += a * b, norm_a += a * a, norm_b += b * b;
  }
  double cosine() const {
    if (norm_a == 0 && norm_b == 0) return 1.0;
    if (norm_a == 0 || norm_b == 0) return 0.0;
    return dot / (std::sqrt(norm_a) * std::sqrt(norm_b));
  }
  void store(TensorDiff& out) const {
    out.compared = compared;
    out.out_of_tolerance = out_of_tolerance;
    out.max_abs_error = nan_error ? std::nan("") : max_abs;
    out.max_rel_error = nan_error ? std::nan("") : max_rel;
    out.tolerance_ratio = nan_error ? std::nan("") : ratio;
    out.cosine_similarity = cosine();
    out.status = out_of_tolerance > 0 ? DiffStatus::out_of_tolerance : DiffStatus::within_tolerance;
  }
};

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

/// Loads a trace tensor's file and checks it against what the JSON says about it.
inline torch::Tensor load_trace_tensor(const Trace& trace, const TraceSlot& slot) {
  const std::string_view name = std::string_view(slot.file).starts_with("./") ? std::string_view(slot.file).substr(2) : slot.file;
  const auto path = trace.dir / name;
  auto tensor = safetensors::load_single(path, "data");
  const std::vector<std::int64_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
  if (sizes != slot.shape) {
    throw Error("tracetorch: " + path.string() + ": holds shape " + shape_text(sizes) + " but " +
                trace.json_file.string() + " says " + shape_text(slot.shape));
  }
  if (python_dtype_repr(tensor.scalar_type()) != slot.dtype) {
    throw Error("tracetorch: " + path.string() + ": holds " + python_dtype_repr(tensor.scalar_type()) + " but " +
                trace.json_file.string() + " says " + slot.dtype);
  }
  return tensor;
}

/// Compares two tensors element by element, a slice at a time, in double precision.
inline void compare_tensors(torch::Tensor a, torch::Tensor b, ErrorAccumulator& acc) {
  if (a.is_complex()) a = torch::view_as_real(a);
  if (b.is_complex()) b = torch::view_as_real(b);
  a = a.reshape({-1});
  b = b.reshape({-1});
  constexpr std::int64_t kChunk = 1 << 20;  // bounds the temporaries to ~8 MB each
  for (std::int64_t start = 0; start < a.numel(); start += kChunk) {
    const auto end = std::min(a.numel(), start + kChunk);
    const auto x = a.slice(0, start, end).to(torch::kDouble).contiguous();
    const auto y = b.slice(0, start, end).to(torch::kDouble).contiguous();
    const double* px = x.data_ptr<double>();
    const double* py = y.data_ptr<double>();
    for (std::int64_t i = 0; i < end - start; ++i) {
      acc.add(px[i], py[i]);
      acc.add_vector_terms(px[i], py[i]);
    }
  }
}

/// The printed numbers of a slot: its own lines, or its file's tensor printed as Python would.
inline std::vector<PrintedNumber> printed_numbers(const Trace& trace, const TraceSlot& slot, const std::string& where) {
  std::vector<std::string> lines = slot.lines;
  if (!slot.file.empty()) lines = python_print_lines(load_trace_tensor(trace, slot));
  std::vector<PrintedNumber> numbers;
  if (!parse_printed_numbers(lines, numbers)) {
    throw Error("tracetorch: " + trace.json_file.string() + ": " + where + ": value is not a printed tensor (" +
                (lines.empty() ? std::string("no lines") : lines[0].substr(0, 60)) + ")");
  }
  return numbers;
}

inline void compare_printed(const Trace& ref, const TraceSlot& r, const Trace& cand, const TraceSlot& c, TensorDiff& out,
                            ErrorAccumulator& acc) {
  const auto a = printed_numbers(cand, c, out.where());
  const auto b = printed_numbers(ref, r, out.where());
  if (a.size() != b.size()) {
    // Same shapes print the same number of values; a different count is a different print layout.
    out.status = DiffStatus::structure_mismatch;
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    acc.add(a[i].value, b[i].value, a[i].half_unit + b[i].half_unit);
    acc.add_vector_terms(a[i].value, b[i].value);
  }
  // Files carry exact data; the statistics lines are compared only where the values are printed,
  // and only within one dtype: Python computes them in the tensor's own dtype (a bf16 mask's
  // mean overflows to -inf where the fp32 one does not).
  if ((!r.lines.empty() || !c.lines.empty()) && r.dtype == c.dtype) {
    for (const auto& [name, ref_text] : r.stats) {
      const auto found = c.stats.find(name);
      if (found == c.stats.end()) continue;
      std::vector<PrintedNumber> x, y;
      if (!parse_printed_numbers({found->second}, x) || !parse_printed_numbers({ref_text}, y) || x.size() != 1 ||
          y.size() != 1) {
        throw Error("tracetorch: " + ref.json_file.string() + " or " + cand.json_file.string() + ": " + out.where() +
                    ": \"" + name + "\" is not a printed 0-d tensor");
      }
      acc.add(x[0].value, y[0].value, x[0].half_unit + y[0].half_unit);
    }
  }
  acc.store(out);
}

inline std::string values_kind(const Trace& trace) {
  if (trace.file_tensors == 0 && trace.printed_tensors == 0) return "none";
  if (trace.printed_tensors == 0) return "safetensors";
  return trace.file_tensors == 0 ? "printed" : "mixed";
}

inline std::string number_text(double v, const char* format = "%.3e") {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

inline boost::json::value number_json(double v) {
  if (std::isfinite(v)) return v;
  return boost::json::string(number_text(v));
}

inline std::string call_name(const std::string& path, std::size_t call) {
  return call > 1 ? path + " (call " + std::to_string(call) + ")" : path;
}


/// Machine epsilon of a floating dtype as the trace writes it ("torch.bfloat16"); 0 for others.
inline double dtype_epsilon(std::string_view dtype) {
  if (dtype == "torch.bfloat16") return 0x1p-7;
  if (dtype == "torch.float16") return 0x1p-10;
  if (dtype == "torch.float32") return 0x1p-23;
  if (dtype == "torch.float64") return 0x1p-52;
  return 0;
}

/// bf16 or fp16 against another floating dtype: the numbers are compared. float32 against
/// float64 stays a dtype mismatch: a port computing in another full precision is a bug to see.
inline bool comparable_across_dtypes(std::string_view a, std::string_view b) {
  const auto reduced = [](std::string_view d) { return d == "torch.bfloat16" || d == "torch.float16"; };
  return dtype_epsilon(a) > 0 && dtype_epsilon(b) > 0 && (reduced(a) || reduced(b));
}

/// (atol, rtol) for one pair: the options', raised to twice the epsilon of the pair's lower precision.
inline std::pair<double, double> pair_tolerance(std::string_view a, std::string_view b, const DiffOptions& options) {
  if (!options.precision_tolerance) return {options.atol, options.rtol};
  const double floor = 2 * std::max(dtype_epsilon(a), dtype_epsilon(b));
  return {std::max(options.atol, floor), std::max(options.rtol, floor)};
}

/// `*` any run of characters (dots included), `?` one character; everything else literal.
inline bool glob_match(std::string_view pattern, std::string_view text) {
  constexpr auto none = std::string_view::npos;
  std::size_t p = 0, t = 0, star = none, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, resume = t;
    } else if (star != none) {  // let the last star take one more character
      p = star + 1, t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

inline bool rule_matches(const AcceptRule& rule, const TensorDiff& t) {
  if (t.kind() != rule.kind || !glob_match(rule.module_pattern, t.module_path)) return false;
  return rule.value_pattern.empty() || glob_match(rule.value_pattern, t.location) ||
         (t.naming_differs() && glob_match(rule.value_pattern, t.candidate_location));
}

inline bool rule_matches(const AcceptRule& rule, const CallDiff& c) {
  return rule.kind == DiffKind::missing_call && glob_match(rule.module_pattern, c.module_path);
}

/// One value of an aligned call (or of a call on one side only), before its values are compared.
struct AlignedValue {
  std::pair<std::size_t, std::size_t> order;  ///< execution order: the reference's, the candidate's extras after
  TensorDiff diff;  ///< placed and named; status only_in_* for a value on one side
  const TraceSlot* reference = nullptr;
  const TraceSlot* candidate = nullptr;
};

struct Alignment {
  std::vector<AlignedValue> values;  ///< in execution order
  std::vector<CallDiff> missing_calls;
};

/// The index in `call.input_keys` of the top-level input that holds the value at `location`.
inline std::optional<std::size_t> input_position(const TraceCall& call, std::string_view location) {
  for (std::size_t i = 0; i < call.input_keys.size(); ++i) {
    const std::string prefix = "inputs." + call.input_keys[i];
    if (location == prefix || (location.starts_with(prefix) && location[prefix.size()] == '.')) return i;
  }
  return std::nullopt;
}

/// The values under one top-level input, as (place below it, is a tensor): its structure.
inline std::vector<std::pair<std::string, bool>> input_structure(const TraceCall& call, const std::string& key) {
  std::vector<std::pair<std::string, bool>> out;
  const std::string prefix = "inputs." + key;
  for (const auto& slot : call.inputs) {
    if (slot.location == prefix || (slot.location.starts_with(prefix) && slot.location[prefix.size()] == '.')) {
      out.emplace_back(slot.location.substr(prefix.size()), slot.is_tensor);
    }
  }
  return out;
}

/// For a reference input left without a partner by name: the candidate's location of the same
/// value when one side passes it positionally (`args.N`) and the other by keyword
/// (`kwargs.NAME`): the same position among the call's inputs, neither name used on the other
/// side, and the same structure below it. Empty when the recorded order does not allow it.
inline std::string renamed_input(const TraceCall& ref, const TraceCall& cand, const std::string& location) {
  const auto position = input_position(ref, location);
  if (!position || *position >= cand.input_keys.size()) return {};
  const std::string& ref_key = ref.input_keys[*position];
  const std::string& cand_key = cand.input_keys[*position];
  const auto positional = [](const std::string& key) { return key.starts_with("args."); };
  const auto keyword = [](const std::string& key) { return key.starts_with("kwargs."); };
  if (!((positional(ref_key) && keyword(cand_key)) || (keyword(ref_key) && positional(cand_key)))) return {};
  const auto has = [](const TraceCall& call, const std::string& key) {
    return std::find(call.input_keys.begin(), call.input_keys.end(), key) != call.input_keys.end();
  };
  if (has(cand, ref_key) || has(ref, cand_key)) return {};
  if (input_structure(ref, ref_key) != input_structure(cand, cand_key)) return {};
  return "inputs." + cand_key + location.substr(("inputs." + ref_key).size());
}

/// Aligns two parsed traces: calls by (renamed) module path and call order, values by their
/// place in the call, then args.N against kwargs.NAME by position. No file is read here.
inline Alignment align_traces(const Trace& ref, const Trace& cand, const std::function<std::string(std::string)>& rename) {
  const auto number_calls = [&](const Trace& trace) {
    std::vector<std::pair<std::string, std::size_t>> keys;
    std::map<std::string, std::size_t> seen;
    for (const auto& call : trace.calls) {
      auto path = rename(call.module_path);
      const auto k = ++seen[path];
      keys.emplace_back(std::move(path), k);
    }
    return keys;
  };
  const auto ref_keys = number_calls(ref);
  const auto cand_keys = number_calls(cand);
  std::map<std::pair<std::string, std::size_t>, std::size_t> cand_index;
  for (std::size_t i = 0; i < cand_keys.size(); ++i) cand_index.emplace(cand_keys[i], i);

  Alignment out;
  const auto add = [&](std::pair<std::size_t, std::size_t> order, const std::pair<std::string, std::size_t>& key,
                       const TraceSlot* r, const TraceSlot* c, DiffStatus status, bool call_missing) {
    TensorDiff d;
    d.module_path = key.first;
    d.call = key.second;
    d.location = (r != nullptr ? r : c)->location;
    d.status = status;
    d.is_tensor = (r != nullptr ? r : c)->is_tensor;
    d.call_missing = call_missing;
    d.from_file = (r != nullptr && r->from_file_only) || (c != nullptr && c->from_file_only);
    if (r != nullptr && c != nullptr && c->location != r->location) d.candidate_location = c->location;
    out.values.push_back({order, std::move(d), r, c});
  };
  const auto all_slots = [](const TraceCall& call) {
    std::vector<const TraceSlot*> slots;
    for (const auto& s : call.inputs) slots.push_back(&s);
    for (const auto& s : call.outputs) slots.push_back(&s);
    return slots;
  };
  std::size_t after_reference = 0;
  for (const auto& call : ref.calls) after_reference = std::max(after_reference, call.exit_order + 1);

  std::vector<bool> cand_matched(cand.calls.size(), false);
  for (std::size_t i = 0; i < ref.calls.size(); ++i) {
    const auto& call = ref.calls[i];
    const auto found = cand_index.find(ref_keys[i]);
    if (found == cand_index.end()) {
      out.missing_calls.push_back({ref_keys[i].first, ref_keys[i].second, true, std::nullopt});
      for (const auto* slot : all_slots(call)) add({slot->order, 0}, ref_keys[i], slot, nullptr, DiffStatus::only_in_reference, true);
      continue;
    }
    cand_matched[found->second] = true;
    const auto& other = cand.calls[found->second];
    std::map<std::string, const TraceSlot*> other_slots;
    for (const auto* slot : all_slots(other)) other_slots.emplace(slot->location, slot);
    for (const auto* slot : all_slots(call)) {
      auto match = other_slots.find(slot->location);
      if (match == other_slots.end()) {
        // Not there by name: perhaps passed positionally on one side and by keyword on the other.
        if (const auto renamed = renamed_input(call, other, slot->location); !renamed.empty()) match = other_slots.find(renamed);
      }
      if (match == other_slots.end()) {
        add({slot->order, 0}, ref_keys[i], slot, nullptr, DiffStatus::only_in_reference, false);
        continue;
      }
      add({slot->order, 0}, ref_keys[i], slot, match->second, DiffStatus::within_tolerance, false);
      other_slots.erase(match);
    }
    std::size_t extra = 0;
    for (const auto* slot : all_slots(other)) {
      if (other_slots.count(slot->location) == 0) continue;
      add({call.exit_order, ++extra}, ref_keys[i], nullptr, slot, DiffStatus::only_in_candidate, false);
    }
  }
  for (std::size_t j = 0; j < cand.calls.size(); ++j) {
    if (cand_matched[j]) continue;
    out.missing_calls.push_back({cand_keys[j].first, cand_keys[j].second, false, std::nullopt});
    for (const auto* slot : all_slots(cand.calls[j])) {
      add({after_reference + slot->order, 0}, cand_keys[j], nullptr, slot, DiffStatus::only_in_candidate, true);
    }
  }
  std::stable_sort(out.values.begin(), out.values.end(),
                   [](const AlignedValue& a, const AlignedValue& b) { return a.order < b.order; });
  return out;
}

/// The root's output tensors found as files: the debugger (transformers' and tracetorch's)
/// writes `<Root>_outputs*.safetensors` but leaves a call with children without outputs in
/// the JSON, so the model's own outputs would otherwise go uncompared. Only the headers are read.
inline std::vector<TraceSlot> root_output_files(const Trace& trace) {
  std::vector<TraceSlot> out;
  if (trace.calls.empty() || !trace.calls[0].outputs.empty()) return out;
  const auto bare = [](std::string_view file) { return std::string(file.starts_with("./") ? file.substr(2) : file); };
  std::set<std::string> referenced;
  for (const auto& call : trace.calls) {
    for (const auto* slots : {&call.inputs, &call.outputs}) {
      for (const auto& slot : *slots) {
        if (!slot.file.empty()) referenced.insert(bare(slot.file));
      }
    }
  }
  const std::string stem = trace.calls[0].module_path + "_outputs";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(trace.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".safetensors") || referenced.count(name) != 0) continue;
    if (name == stem + ".safetensors" || name.starts_with(stem + "_")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const safetensors::Reader reader(trace.dir / name);
    const auto& info = reader.info("data");
    TraceSlot slot;
    const std::string suffix = name.substr(stem.size(), name.size() - stem.size() - std::string_view(".safetensors").size());
    slot.location = suffix.empty() ? "outputs" : "outputs." + suffix.substr(1);  // "_last_hidden_state" -> ".last_hidden_state"
    slot.is_tensor = true;
    slot.shape = info.shape;
    slot.dtype = python_dtype_repr(info.dtype);
    slot.file = "./" + name;
    slot.from_file_only = true;
    out.push_back(std::move(slot));
  }
  return out;
}

/// Appends the root's output files to its outputs, placed in execution order at its end.
inline void add_root_outputs(Trace& trace, std::vector<TraceSlot> slots) {
  if (slots.empty()) return;
  auto& root = trace.calls[0];
  for (auto& slot : slots) {
    slot.order = root.exit_order++;
    ++trace.file_tensors;
    root.outputs.push_back(std::move(slot));
  }
}

/// Marks what the rules accept and counts each rule's matches; a call's acceptance covers its values.
inline void apply_accept_rules(std::vector<AcceptRule>& rules, std::vector<TensorDiff>& values, std::vector<CallDiff>& calls) {
  for (auto& call : calls) {
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (!rule_matches(rules[r], call)) continue;
      call.accepted_by = r;
      ++rules[r].matched;
      break;
    }
  }
  for (auto& value : values) {
    if (!value.mismatched()) continue;
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (!rule_matches(rules[r], value)) continue;
      value.accepted_by = r;
      if (!value.call_missing) ++rules[r].matched;  // a missing call counts once, as the call
      break;
    }
  }
}

}  // namespace detail

inline std::vector<AcceptRule> parse_accept_rules(std::string_view text, const std::string& file_name) {
  std::vector<AcceptRule> rules;
  std::size_t line_number = 0;
  const auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
  };
  const auto next_field = [&](std::string_view& rest) {
    rest = trim(rest);
    const auto end = rest.find_first_of(" \t");
    const auto field = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    return field;
  };
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view line = trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const auto fail = [&](const std::string& what) -> Error {
      return Error("tracetorch: " + file_name + ":" + std::to_string(line_number) + ": " + what);
    };
    AcceptRule rule;
    rule.file = file_name;
    rule.line = line_number;
    std::string_view rest = line;
    const auto pattern = next_field(rest);
    const auto kind = next_field(rest);
    rule.reason = std::string(trim(rest));
    if (kind.empty()) throw fail("expected PATTERN KIND REASON, got \"" + std::string(line.substr(0, 80)) + "\"");
    const auto colon = pattern.find(':');
    rule.module_pattern = std::string(pattern.substr(0, colon));
    if (colon != std::string_view::npos) rule.value_pattern = std::string(pattern.substr(colon + 1));
    if (rule.module_pattern.empty() || (colon != std::string_view::npos && rule.value_pattern.empty()) ||
        rule.value_pattern.find(':') != std::string::npos) {
      throw fail("pattern \"" + std::string(pattern) + "\" is not MODULE or MODULE:VALUE");
    }
    const auto known = std::find_if(std::begin(kDiffKinds), std::end(kDiffKinds),
                                    [&](DiffKind k) { return kind == to_string(k); });
    if (known == std::end(kDiffKinds)) {
      std::string names;
      for (const auto k : kDiffKinds) names += std::string(names.empty() ? "" : ", ") + to_string(k);
      throw fail("unknown kind \"" + std::string(kind) + "\" (one of " + names + ")");
    }
    rule.kind = *known;
    if (rule.kind == DiffKind::missing_call && !rule.value_pattern.empty()) {
      throw fail("a missing-call rule names a module, not a value: \"" + std::string(pattern) + "\"");
    }
    // An accepted difference must say why it is acceptable: that is what makes it reviewed.
    if (rule.reason.empty()) throw fail("a rule needs a reason after its kind");
    rules.push_back(std::move(rule));
  }
  return rules;
}

inline std::vector<AcceptRule> load_accept_rules(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("tracetorch: " + path.string() + ": cannot open: " + std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw Error("tracetorch: " + path.string() + ": cannot read");
  return parse_accept_rules(text, path.string());
}

/// Compares the candidate trace against the reference trace. Throws Error (naming the file)
/// for a trace that cannot be read or is malformed, including any tensor file it names.
inline DiffReport diff_traces(const std::filesystem::path& reference, const std::filesystem::path& candidate,
                              const DiffOptions& options = {}) {
  using detail::TraceSlot;
  auto ref = detail::parse_trace_file(detail::resolve_trace_path(reference));
  auto cand = detail::parse_trace_file(detail::resolve_trace_path(candidate));

  DiffReport report;
  report.reference_file = ref.json_file;
  report.candidate_file = cand.json_file;
  report.atol = options.atol;
  report.rtol = options.rtol;
  report.precision_tolerance = options.precision_tolerance;
  report.renames = options.renames;
  report.rules = options.accept;
  for (auto& rule : report.rules) rule.matched = 0;
  report.reference_calls = ref.calls.size();
  report.candidate_calls = cand.calls.size();

  // The root's outputs exist only as files: compared where both traces hold files; a printed
  // trace has lost them, and comparing one side's files against nothing would report them missing.
  auto ref_roots = detail::root_output_files(ref);
  auto cand_roots = detail::root_output_files(cand);
  if (ref.file_tensors > 0 && cand.file_tensors > 0) {
    detail::add_root_outputs(ref, std::move(ref_roots));
    detail::add_root_outputs(cand, std::move(cand_roots));
  } else if (!ref_roots.empty() || !cand_roots.empty()) {
    report.notes.push_back(std::string("the root's outputs are not compared: the ") +
                           (ref.file_tensors == 0 ? "reference" : "candidate") +
                           " trace holds printed values, and the debugger leaves a root's outputs out of the JSON");
  }
  report.reference_values = detail::values_kind(ref);
  report.candidate_values = detail::values_kind(cand);

  std::vector<std::pair<std::shared_ptr<const re2::RE2>, std::string>> rewrites;
  for (const auto& rename : options.renames) rewrites.emplace_back(rename.compiled(), rename.rewrite());
  const auto renamed = [&](std::string path) {
    for (const auto& [pattern, rewrite] : rewrites) re2::RE2::GlobalReplace(&path, *pattern, rewrite);
    return path;
  };
  auto alignment = detail::align_traces(ref, cand, renamed);
  report.missing_calls = std::move(alignment.missing_calls);
  for (const auto& call : report.missing_calls) (call.in_reference ? report.only_in_reference : report.only_in_candidate).push_back(call.name());

  // Values are compared one pair at a time, so that progress can count them and one pair at a time is in memory.
  std::size_t done = 0;
  for (auto& p : alignment.values) {
    auto& d = p.diff;
    const TraceSlot* r = p.reference;
    const TraceSlot* c = p.candidate;
    if (r != nullptr) d.reference_shape = r->is_tensor ? detail::shape_text(r->shape) : r->text;
    if (c != nullptr) d.candidate_shape = c->is_tensor ? detail::shape_text(c->shape) : c->text;
    if (r != nullptr) d.reference_dtype = r->dtype;
    if (c != nullptr) d.candidate_dtype = c->dtype;
    if (r == nullptr || c == nullptr) {
      // reported as it is
    } else if (r->is_tensor != c->is_tensor) {
      d.is_tensor = true;
      d.status = DiffStatus::structure_mismatch;
    } else if (!r->is_tensor) {
      d.status = r->text == c->text ? DiffStatus::within_tolerance : DiffStatus::value_mismatch;
    } else if (r->shape != c->shape) {
      d.status = DiffStatus::shape_mismatch;
    } else if (r->dtype != c->dtype && !detail::comparable_across_dtypes(r->dtype, c->dtype)) {
      d.status = DiffStatus::dtype_mismatch;
    } else {
      std::tie(d.atol, d.rtol) = detail::pair_tolerance(r->dtype, c->dtype, options);
      detail::ErrorAccumulator acc{d.atol, d.rtol};
      if (!r->file.empty() && !c->file.empty()) {
        const auto b = detail::load_trace_tensor(ref, *r);
        const auto a = detail::load_trace_tensor(cand, *c);
        detail::compare_tensors(a, b, acc);
        acc.store(d);
      } else {
        d.printed = true;
        detail::compare_printed(ref, *r, cand, *c, d, acc);
      }
    }
    report.tensors.push_back(std::move(d));
    if (options.progress) options.progress(++done, alignment.values.size());
  }
  detail::apply_accept_rules(report.rules, report.tensors, report.missing_calls);
  for (std::size_t i = 0; i < report.tensors.size(); ++i) {
    if (report.tensors[i].diverges()) {
      report.first_divergence = i;
      break;
    }
  }
  return report;
}

inline DiffCounts DiffReport::counts() const {
  DiffCounts out;
  for (const auto& t : tensors) {
    if (t.call_missing) continue;  // counted once, as its call
    ++(t.is_tensor ? out.tensors : out.other_values);
    out.naming += t.naming_differs() ? 1 : 0;
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
    ++(t.is_tensor ? m.tensors : m.other_values);
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

inline std::string DiffReport::text(bool all, std::size_t worst) const {
  using detail::number_text;
  std::string out;
  out += "reference: " + reference_file.string() + " (" + reference_values + " values, " + std::to_string(reference_calls) +
         " module calls)\n";
  out += "candidate: " + candidate_file.string() + " (" + candidate_values + " values, " + std::to_string(candidate_calls) +
         " module calls)\n";
  out += "tolerance: |candidate - reference| <= " + number_text(atol, "%g") + " + " + number_text(rtol, "%g") +
         " * |reference|" +
         (std::any_of(tensors.begin(), tensors.end(), [&](const TensorDiff& t) { return t.atol > atol || t.rtol > rtol; })
              ? std::string(" (bf16/fp16 pairs: at least twice the lower precision's epsilon)")
              : std::string()) +
         "\n";
  if (precision_limited()) {
    out += "note: values compared as printed (print(tensor): 4 significant digits, edge items only above 1000 elements); "
           "precision is limited to the printed digits, each tolerance widened by half a unit in the last digit\n";
  }
  for (const auto& note : notes) out += "note: " + note + "\n";
  const auto accepted_text = [&](const std::optional<std::size_t>& rule) {
    return rule ? " (accepted, " + rules[*rule].origin() + ": " + rules[*rule].reason + ")" : std::string();
  };
  for (const auto& c : missing_calls) {
    out += std::string(c.in_reference ? "only in reference: " : "only in candidate: ") + c.name() + accepted_text(c.accepted_by) + "\n";
  }
  const auto n = counts();
  const auto detail_line = [&](const TensorDiff& t) {
    std::string line = std::string(to_string(t.status));
    if (t.status == DiffStatus::out_of_tolerance) {
      line += ": " + std::to_string(t.out_of_tolerance) + " of " + std::to_string(t.compared) + " " +
              (t.printed ? "printed values" : "elements") + ", max abs error " + number_text(t.max_abs_error) +
              ", max rel error " + number_text(t.max_rel_error) + ", cosine " + number_text(t.cosine_similarity, "%.6f");
    } else if (t.status == DiffStatus::shape_mismatch || t.status == DiffStatus::value_mismatch ||
               t.status == DiffStatus::structure_mismatch) {
      line += ": reference " + t.reference_shape + ", candidate " + t.candidate_shape;
    } else if (t.status == DiffStatus::dtype_mismatch) {
      line += ": reference " + t.reference_dtype + ", candidate " + t.candidate_dtype;
    }
    return line;
  };
  if (first_divergence) {
    const auto& t = tensors[*first_divergence];
    out += "first divergence: " + t.where() + "\n";
    out += "  " + detail_line(t) + "\n";
  } else if (n.not_accepted > 0) {  // only missing calls that recorded no value
    for (const auto& c : missing_calls) {
      if (c.accepted_by) continue;
      out += "first divergence: " + c.name() + ": module call only in " + (c.in_reference ? "reference" : "candidate") + "\n";
      break;
    }
  } else if (n.accepted == 0) {
    out += "no divergence: all " + std::to_string(n.tensors) + " tensors within tolerance, all " +
           std::to_string(n.other_values) + " other values equal\n";
  } else {
    out += "no divergence: " + std::to_string(n.tensors) + " tensors and " + std::to_string(n.other_values) +
           " other values compared; every difference is accepted\n";
  }
  // Every kind is listed, zero or not, so that the line and the verdict below add up.
  // "name count" pairs, so that a count of 1 reads as well as any other.
  out += "differences: tensors out of tolerance " + std::to_string(n.of(DiffKind::values)) + ", non-tensor values " +
         std::to_string(n.of(DiffKind::non_tensor)) + ", shape " + std::to_string(n.of(DiffKind::shape)) + ", structure " +
         std::to_string(n.of(DiffKind::structure)) + ", dtype " + std::to_string(n.of(DiffKind::dtype)) +
         "; values only in reference " + std::to_string(n.values_only_in_reference) + ", only in candidate " +
         std::to_string(n.values_only_in_candidate) + "; module calls only in reference " +
         std::to_string(n.calls_only_in_reference) + ", only in candidate " + std::to_string(n.calls_only_in_candidate) +
         " (of " + std::to_string(n.tensors) + " tensors and " + std::to_string(n.other_values) + " other values)\n";
  out += "verdict: differences " + std::to_string(n.total()) + ", accepted " + std::to_string(n.accepted) + ", not accepted " +
         std::to_string(n.not_accepted) + ": " + (n.not_accepted == 0 ? "within tolerance" : "diverges") + "\n";
  if (n.naming > 0) {
    out += "naming: values recorded positionally on one side and by keyword on the other, aligned by position: " +
           std::to_string(n.naming) + "\n";
    std::size_t shown = 0;
    for (const auto& t : tensors) {
      if (!t.naming_differs() || t.call_missing) continue;
      if (++shown > 5) {
        out += "  ... and " + std::to_string(n.naming - 5) + " more\n";
        break;
      }
      out += "  " + t.where() + ": reference " + t.location + ", candidate " + t.candidate_location + "\n";
    }
  }
  if (n.across_dtypes > 0) {
    // Reported apart: the numbers were compared, at the lower precision's tolerance.
    std::map<std::string, std::pair<std::size_t, const TensorDiff*>> pairs;
    for (const auto& t : tensors) {
      if (!t.is_tensor || !t.across_dtypes() || t.call_missing) continue;
      auto& entry = pairs[t.reference_dtype + " against " + t.candidate_dtype];
      if (entry.first++ == 0) entry.second = &t;
    }
    for (const auto& [dtypes, entry] : pairs) {
      out += "dtypes: " + std::to_string(entry.first) + " tensors compared across dtypes, reference " + dtypes +
             " (both widened to float64), at atol " + number_text(entry.second->atol, "%g") + ", rtol " +
             number_text(entry.second->rtol, "%g") + "\n";
    }
  }
  if (n.accepted > 0) {
    out += "accepted differences:\n";
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (rules[r].matched == 0) continue;
      const auto& rule = rules[r];
      out += "  " + rule.origin() + " " + rule.pattern() + " " + to_string(rule.kind) + " (" + std::to_string(rule.matched) +
             "): " + rule.reason + "\n";
      std::size_t shown = 0;
      const auto show = [&](const std::string& line) {
        if (++shown <= 3) out += "    " + line + "\n";
      };
      for (const auto& c : missing_calls) {
        if (c.accepted_by == r) show(c.name() + ": module call only in " + (c.in_reference ? "reference" : "candidate"));
      }
      for (const auto& t : tensors) {
        if (t.accepted_by == r && !t.call_missing) show(t.where() + ": " + detail_line(t));
      }
      if (shown > 3) out += "    ... and " + std::to_string(shown - 3) + " more\n";
    }
  }
  for (const auto* rule : stale_rules()) {
    out += "stale rule: " + rule->origin() + " " + rule->pattern() + " " + to_string(rule->kind) +
           " matched no difference (" + rule->reason + ")\n";
  }
  const auto rows = modules();
  if (!rows.empty() && worst > 0) {
    char line[1024];
    std::size_t width = 6;
    for (std::size_t i = 0; i < rows.size() && i < worst; ++i) width = std::max(width, rows[i].module_path.size());
    out += "worst modules:\n";
    std::snprintf(line, sizeof line, "  %-*s %7s %5s %7s %18s %12s %12s %11s  %s\n", static_cast<int>(width), "module",
                  "tensors", "other", "diverge", "out of tolerance", "max abs err", "max rel err", "min cosine", "note");
    out += line;
    for (std::size_t i = 0; i < rows.size() && i < worst; ++i) {
      const auto& m = rows[i];
      // No element compared (a call on one side only, non-tensor values): no numbers to show, not perfect ones.
      const bool numbers = m.compared > 0;
      const std::string count = numbers ? std::to_string(m.out_of_tolerance) + "/" + std::to_string(m.compared) : "-";
      std::snprintf(line, sizeof line, "  %-*s %7zu %5zu %7zu %18s %12s %12s %11s  %s", static_cast<int>(width),
                    m.module_path.c_str(), m.tensors, m.other_values, m.diverging, count.c_str(),
                    numbers ? number_text(m.max_abs_error).c_str() : "-", numbers ? number_text(m.max_rel_error).c_str() : "-",
                    numbers ? number_text(m.min_cosine_similarity, "%.6f").c_str() : "-", m.note().c_str());
      std::string text_line = line;
      while (!text_line.empty() && text_line.back() == ' ') text_line.pop_back();
      out += text_line + "\n";
    }
  }
  if (all) {
    out += "all compared values:\n";
    for (const auto& t : tensors) {
      out += "  " + t.where() + ": " + to_string(t.status);
      if (t.is_tensor && t.compared > 0) {
        out += ", shape " + t.reference_shape + ", " + std::to_string(t.out_of_tolerance) + "/" + std::to_string(t.compared) +
               " out of tolerance, max abs " + number_text(t.max_abs_error) + ", max rel " + number_text(t.max_rel_error) +
               ", cosine " + number_text(t.cosine_similarity, "%.6f") + (t.printed ? " (printed)" : "");
      } else if (t.status != DiffStatus::within_tolerance || !t.is_tensor) {
        const auto side = [](const std::string& shape, const std::string& dtype) {
          return shape.empty() ? std::string("-") : dtype.empty() ? shape : shape + " " + dtype;
        };
        out += ", reference " + side(t.reference_shape, t.reference_dtype) + ", candidate " + side(t.candidate_shape, t.candidate_dtype);
      }
      if (t.naming_differs()) out += ", candidate names it " + t.candidate_location;
      if (t.is_tensor && t.across_dtypes()) out += ", across dtypes " + t.reference_dtype + " / " + t.candidate_dtype;
      if (t.from_file) out += " (root output, from its file)";
      out += accepted_text(t.accepted_by) + "\n";
    }
  }
  return out;
}

inline boost::json::object DiffReport::json() const {
  using detail::number_json;
  boost::json::object out;
  out["reference"] = reference_file.string();
  out["candidate"] = candidate_file.string();
  out["reference_values"] = reference_values;
  out["candidate_values"] = candidate_values;
  out["atol"] = atol;
  out["rtol"] = rtol;
  out["precision_tolerance"] = precision_tolerance;
  boost::json::array maps;
  for (const auto& r : renames) maps.push_back(boost::json::string(r.pattern + "=>" + r.replacement));
  out["maps"] = std::move(maps);
  out["precision_limited_to_printed_digits"] = precision_limited();
  out["notes"] = boost::json::array(notes.begin(), notes.end());
  const auto n = counts();
  out["within_tolerance"] = n.not_accepted == 0;
  boost::json::object kinds;
  for (const auto kind : kDiffKinds) kinds[to_string(kind)] = n.of(kind);
  out["differences"] = {{"by_kind", std::move(kinds)},
                        {"values_only_in_reference", n.values_only_in_reference},
                        {"values_only_in_candidate", n.values_only_in_candidate},
                        {"calls_only_in_reference", n.calls_only_in_reference},
                        {"calls_only_in_candidate", n.calls_only_in_candidate},
                        {"accepted", n.accepted},
                        {"not_accepted", n.not_accepted},
                        {"naming", n.naming},
                        {"across_dtypes", n.across_dtypes},
                        {"tensors", n.tensors},
                        {"other_values", n.other_values}};
  if (first_divergence) {
    const auto& t = tensors[*first_divergence];
    out["first_divergence"] = {{"module_path", t.module_path}, {"call", t.call}, {"location", t.location},
                               {"status", to_string(t.status)}, {"index", *first_divergence}};
  } else {
    out["first_divergence"] = nullptr;
  }
  boost::json::array rule_rows;
  for (const auto& rule : rules) {
    rule_rows.push_back(boost::json::object{{"origin", rule.origin()}, {"pattern", rule.pattern()}, {"kind", to_string(rule.kind)},
                                            {"reason", rule.reason}, {"matched", rule.matched}, {"stale", rule.matched == 0}});
  }
  out["rules"] = std::move(rule_rows);
  const auto accepted_json = [&](const std::optional<std::size_t>& rule) -> boost::json::value {
    if (!rule) return nullptr;
    return boost::json::object{{"rule", rules[*rule].origin()}, {"reason", rules[*rule].reason}};
  };
  boost::json::array only_ref(only_in_reference.begin(), only_in_reference.end());
  boost::json::array only_cand(only_in_candidate.begin(), only_in_candidate.end());
  out["only_in_reference"] = std::move(only_ref);
  out["only_in_candidate"] = std::move(only_cand);
  boost::json::array call_rows;
  for (const auto& c : missing_calls) {
    call_rows.push_back(boost::json::object{{"module_path", c.module_path}, {"call", c.call},
                                            {"only_in", c.in_reference ? "reference" : "candidate"},
                                            {"accepted", accepted_json(c.accepted_by)}});
  }
  out["missing_calls"] = std::move(call_rows);
  boost::json::array module_rows;
  for (const auto& m : modules()) {
    module_rows.push_back(boost::json::object{{"module_path", m.module_path},
                                              {"tensors", m.tensors},
                                              {"other_values", m.other_values},
                                              {"diverging", m.diverging},
                                              {"accepted", m.accepted},
                                              {"calls_only_in_reference", m.calls_only_in_reference},
                                              {"calls_only_in_candidate", m.calls_only_in_candidate},
                                              {"note", m.note()},
                                              {"compared", m.compared},
                                              {"out_of_tolerance", m.out_of_tolerance},
                                              {"max_abs_error", number_json(m.max_abs_error)},
                                              {"max_rel_error", number_json(m.max_rel_error)},
                                              {"min_cosine_similarity", number_json(m.min_cosine_similarity)},
                                              {"tolerance_ratio", number_json(m.tolerance_ratio)}});
  }
  out["modules"] = std::move(module_rows);
  boost::json::array rows;
  for (const auto& t : tensors) {
    const auto kind = t.kind();
    boost::json::object row{{"module_path", t.module_path},
                            {"call", t.call},
                            {"location", t.location},
                            {"candidate_location", t.naming_differs() ? t.candidate_location : t.location},
                            {"status", to_string(t.status)},
                            {"kind", kind ? boost::json::value(to_string(*kind)) : boost::json::value(nullptr)},
                            {"accepted", accepted_json(t.accepted_by)},
                            {"is_tensor", t.is_tensor},
                            {"printed", t.printed},
                            {"call_missing", t.call_missing},
                            {"root_output_from_file", t.from_file},
                            {"reference_shape", t.reference_shape},
                            {"candidate_shape", t.candidate_shape},
                            {"reference_dtype", t.reference_dtype},
                            {"candidate_dtype", t.candidate_dtype},
                            {"compared", t.compared},
                            {"out_of_tolerance", t.out_of_tolerance}};
    if (t.compared > 0) {
      row["max_abs_error"] = number_json(t.max_abs_error);
      row["max_rel_error"] = number_json(t.max_rel_error);
      row["cosine_similarity"] = number_json(t.cosine_similarity);
      row["tolerance_ratio"] = number_json(t.tolerance_ratio);
      row["atol"] = t.atol;
      row["rtol"] = t.rtol;
    }
    rows.push_back(std::move(row));
  }
  out["tensors"] = std::move(rows);
  return out;
}

/// Writes `report.json()` to `path` (complete or not at all); throws Error naming the path.
inline void write_diff_report(const DiffReport& report, const std::filesystem::path& path) {
  detail::AtomicFileWriter writer(path);
  writer.write(boost::json::serialize(report.json()));
  writer.write("\n");
  writer.commit();
}

}  // namespace tracetorch
