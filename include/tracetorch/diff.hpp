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

#include <torch/torch.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/atomic_file.hpp"
#include "tracetorch/detail/trace_reader.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/python_repr.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch {

/// One `--map 'REGEX=>REPLACEMENT'`: module paths are rewritten with std::regex_replace
/// (ECMAScript syntax, `$1` for groups) on both sides before alignment, so a port whose
/// modules are named differently (`Model.blocks.3`) can meet its reference (`LlamaModel.layers.3`).
struct PathRename {
  std::string pattern;
  std::string replacement;

  /// Splits "REGEX=>REPLACEMENT" at the first "=>"; throws Error for a missing "=>" or a bad regex.
  static PathRename parse(std::string_view spec) {
    const auto arrow = spec.find("=>");
    if (arrow == std::string_view::npos) {
      throw Error("tracetorch: --map " + std::string(spec) + ": expected 'REGEX=>REPLACEMENT'");
    }
    PathRename rename{std::string(spec.substr(0, arrow)), std::string(spec.substr(arrow + 2))};
    rename.compiled();  // validates now, not at the first path
    return rename;
  }

  std::regex compiled() const {
    try {
      return std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("tracetorch: --map " + pattern + "=>" + replacement + ": invalid regex: " + e.what());
    }
  }
};

struct DiffOptions {
  /// Elements a (candidate) and b (reference) agree when |a - b| <= atol + rtol * |b|
  /// (numpy's allclose); NaN agrees with NaN at the same place, inf with the same inf.
  double atol = 1e-5;
  double rtol = 1e-4;
  /// Applied in order to every module path of both traces.
  std::vector<PathRename> renames;
  /// Called after each compared tensor with (done, total); for a progress line.
  std::function<void(std::size_t, std::size_t)> progress;
};

/// What became of one tensor (or other recorded value) of an aligned call.
enum class DiffStatus {
  within_tolerance,
  out_of_tolerance,
  shape_mismatch,
  dtype_mismatch,
  value_mismatch,     ///< a non-tensor value (None, 3, 'text') that differs, or a tensor on one side only
  only_in_reference,  ///< the call, or this value of it, is missing from the candidate
  only_in_candidate,
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
  }
  return "?";
}

/// One compared value. Errors are of the candidate against the reference.
struct TensorDiff {
  std::string module_path;  ///< after renames
  std::size_t call = 1;     ///< 1 for the first call of this path, 2 for the second, ...
  std::string location;     ///< "inputs.args.0", "outputs", ...
  DiffStatus status = DiffStatus::within_tolerance;
  bool is_tensor = true;
  bool printed = false;  ///< compared from printed values: precision limited to the printed digits
  std::string reference_shape, candidate_shape, reference_dtype, candidate_dtype;  ///< as the traces write them
  std::int64_t compared = 0;          ///< elements (or printed numbers and stats) compared
  std::int64_t out_of_tolerance = 0;  ///< of those, how many break the tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;       ///< max |a - b| / |b| (inf where b = 0 and a != 0)
  double cosine_similarity = 1;   ///< of the two tensors as vectors (1 for two zero vectors)
  double tolerance_ratio = 0;     ///< max |a - b| / (atol + rtol * |b|): above 1 is out of tolerance

  bool diverges() const { return status != DiffStatus::within_tolerance; }
  /// "inputs.args.0" for tensors, as `first divergence:` prints it.
  std::string where() const { return module_path + " " + location + (call > 1 ? " (call " + std::to_string(call) + ")" : ""); }
};

/// The tensors of one module path, summed up: the rows of the worst-modules table.
struct ModuleDiff {
  std::string module_path;
  std::size_t tensors = 0, diverging = 0;
  std::int64_t compared = 0, out_of_tolerance = 0;
  double max_abs_error = 0, max_rel_error = 0, min_cosine_similarity = 1, tolerance_ratio = 0;
};

struct DiffReport {
  std::filesystem::path reference_file, candidate_file;
  std::string reference_values, candidate_values;  ///< "safetensors", "printed", "mixed", "none"
  double atol = 0, rtol = 0;
  std::vector<PathRename> renames;
  std::size_t reference_calls = 0, candidate_calls = 0;
  std::vector<TensorDiff> tensors;  ///< in execution order (the reference's; the candidate's extra calls last)
  std::vector<std::string> only_in_reference, only_in_candidate;  ///< module calls, "path" or "path (call 2)"
  std::optional<std::size_t> first_divergence;  ///< index into tensors

  bool within_tolerance() const { return !first_divergence.has_value(); }
  bool precision_limited() const {
    return std::any_of(tensors.begin(), tensors.end(), [](const TensorDiff& t) { return t.printed; });
  }

  /// Module paths by how far their worst tensor is beyond the tolerance (diverging first).
  std::vector<ModuleDiff> modules() const {
    std::vector<ModuleDiff> out;
    std::map<std::string, std::size_t> index;
    for (const auto& t : tensors) {
      if (!t.is_tensor) continue;
      auto [it, inserted] = index.emplace(t.module_path, out.size());
      if (inserted) out.push_back({t.module_path});
      auto& m = out[it->second];
      ++m.tensors;
      m.diverging += t.diverges() ? 1 : 0;
      m.compared += t.compared;
      m.out_of_tolerance += t.out_of_tolerance;
      m.max_abs_error = nan_max(m.max_abs_error, t.max_abs_error);
      m.max_rel_error = nan_max(m.max_rel_error, t.max_rel_error);
      m.tolerance_ratio = nan_max(m.tolerance_ratio, t.tolerance_ratio);
      if (t.compared > 0) m.min_cosine_similarity = std::isnan(t.cosine_similarity) ? t.cosine_similarity
                                                     : std::min(m.min_cosine_similarity, t.cosine_similarity);
      // Structural mismatches (shape, dtype, missing) rank above any numeric error.
      if (t.diverges() && t.status != DiffStatus::out_of_tolerance) m.tolerance_ratio = HUGE_VAL;
    }
    std::stable_sort(out.begin(), out.end(), [](const ModuleDiff& a, const ModuleDiff& b) {
      const auto key = [](const ModuleDiff& m) { return std::isnan(m.tolerance_ratio) ? HUGE_VAL : m.tolerance_ratio; };
      return std::make_pair(a.diverging > 0, key(a)) > std::make_pair(b.diverging > 0, key(b));
    });
    return out;
  }

  /// The human-readable report: the verdict, `first divergence: <path> <location>`, the worst
  /// modules; with `all`, a line per compared value.
  std::string text(bool all = false, std::size_t worst = 10) const;

  /// The report as JSON (non-finite numbers as the strings "inf", "-inf", "nan").
  boost::json::object json() const;

 private:
  static double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }
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
    out.status = DiffStatus::value_mismatch;
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    acc.add(a[i].value, b[i].value, a[i].half_unit + b[i].half_unit);
    acc.add_vector_terms(a[i].value, b[i].value);
  }
  // Files carry exact data; the statistics lines are compared only where the values are printed.
  if (!r.lines.empty() || !c.lines.empty()) {
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

}  // namespace detail

/// Compares the candidate trace against the reference trace. Throws Error (naming the file)
/// for a trace that cannot be read or is malformed, including any tensor file it names.
inline DiffReport diff_traces(const std::filesystem::path& reference, const std::filesystem::path& candidate,
                              const DiffOptions& options = {}) {
  using detail::TraceCall;
  using detail::TraceSlot;
  const auto ref = detail::parse_trace_file(detail::resolve_trace_path(reference));
  const auto cand = detail::parse_trace_file(detail::resolve_trace_path(candidate));

  DiffReport report;
  report.reference_file = ref.json_file;
  report.candidate_file = cand.json_file;
  report.reference_values = detail::values_kind(ref);
  report.candidate_values = detail::values_kind(cand);
  report.atol = options.atol;
  report.rtol = options.rtol;
  report.renames = options.renames;
  report.reference_calls = ref.calls.size();
  report.candidate_calls = cand.calls.size();

  std::vector<std::regex> regexes;
  for (const auto& rename : options.renames) regexes.push_back(rename.compiled());
  const auto renamed = [&](std::string path) {
    for (std::size_t i = 0; i < regexes.size(); ++i) path = std::regex_replace(path, regexes[i], options.renames[i].replacement);
    return path;
  };

  // (path, k) -> the k-th call of path, for both sides.
  const auto number_calls = [&](const detail::Trace& trace) {
    std::vector<std::pair<std::string, std::size_t>> keys;
    std::map<std::string, std::size_t> seen;
    for (const auto& call : trace.calls) {
      auto path = renamed(call.module_path);
      const auto k = ++seen[path];
      keys.emplace_back(std::move(path), k);
    }
    return keys;
  };
  const auto ref_keys = number_calls(ref);
  const auto cand_keys = number_calls(cand);
  std::map<std::pair<std::string, std::size_t>, std::size_t> cand_index;
  for (std::size_t i = 0; i < cand_keys.size(); ++i) cand_index.emplace(cand_keys[i], i);

  // Pairs to compare, each with a sort key in execution order; values are compared afterwards,
  // one pair at a time, so that progress can count them.
  struct Pending {
    std::pair<std::size_t, std::size_t> order;
    TensorDiff diff;
    const TraceSlot* ref_slot = nullptr;
    const TraceSlot* cand_slot = nullptr;
  };
  std::vector<Pending> pending;
  std::vector<bool> cand_matched(cand.calls.size(), false);
  const auto make = [&](const std::pair<std::string, std::size_t>& key, const TraceSlot& slot, DiffStatus status) {
    TensorDiff d;
    d.module_path = key.first;
    d.call = key.second;
    d.location = slot.location;
    d.status = status;
    d.is_tensor = slot.is_tensor;
    return d;
  };
  const auto all_slots = [](const TraceCall& call) {
    std::vector<const TraceSlot*> out;
    for (const auto& s : call.inputs) out.push_back(&s);
    for (const auto& s : call.outputs) out.push_back(&s);
    return out;
  };
  std::size_t after_reference = 0;
  for (const auto& call : ref.calls) after_reference = std::max(after_reference, call.exit_order + 1);

  for (std::size_t i = 0; i < ref.calls.size(); ++i) {
    const auto& call = ref.calls[i];
    const auto found = cand_index.find(ref_keys[i]);
    if (found == cand_index.end()) {
      report.only_in_reference.push_back(detail::call_name(ref_keys[i].first, ref_keys[i].second));
      for (const auto* slot : all_slots(call)) {
        pending.push_back({{slot->order, 0}, make(ref_keys[i], *slot, DiffStatus::only_in_reference), slot, nullptr});
      }
      continue;
    }
    cand_matched[found->second] = true;
    const auto& other = cand.calls[found->second];
    std::map<std::string, const TraceSlot*> other_slots;
    for (const auto* slot : all_slots(other)) other_slots.emplace(slot->location, slot);
    for (const auto* slot : all_slots(call)) {
      const auto match = other_slots.find(slot->location);
      if (match == other_slots.end()) {
        pending.push_back({{slot->order, 0}, make(ref_keys[i], *slot, DiffStatus::only_in_reference), slot, nullptr});
        continue;
      }
      pending.push_back({{slot->order, 0}, make(ref_keys[i], *slot, DiffStatus::within_tolerance), slot, match->second});
      other_slots.erase(match);
    }
    std::size_t extra = 0;
    for (const auto* slot : all_slots(other)) {
      if (other_slots.count(slot->location) == 0) continue;
      pending.push_back({{call.exit_order, ++extra}, make(ref_keys[i], *slot, DiffStatus::only_in_candidate), nullptr, slot});
    }
  }
  for (std::size_t j = 0; j < cand.calls.size(); ++j) {
    if (cand_matched[j]) continue;
    report.only_in_candidate.push_back(detail::call_name(cand_keys[j].first, cand_keys[j].second));
    for (const auto* slot : all_slots(cand.calls[j])) {
      pending.push_back({{after_reference + slot->order, 0}, make(cand_keys[j], *slot, DiffStatus::only_in_candidate),
                         nullptr, slot});
    }
  }
  std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.order < b.order; });

  std::size_t done = 0;
  for (auto& p : pending) {
    auto& d = p.diff;
    const TraceSlot* r = p.ref_slot;
    const TraceSlot* c = p.cand_slot;
    if (r != nullptr) d.reference_shape = r->is_tensor ? detail::shape_text(r->shape) : r->text;
    if (c != nullptr) d.candidate_shape = c->is_tensor ? detail::shape_text(c->shape) : c->text;
    if (r != nullptr) d.reference_dtype = r->dtype;
    if (c != nullptr) d.candidate_dtype = c->dtype;
    if (r == nullptr || c == nullptr) {
      // reported as it is
    } else if (r->is_tensor != c->is_tensor) {
      d.is_tensor = true;
      d.status = DiffStatus::value_mismatch;
    } else if (!r->is_tensor) {
      d.status = r->text == c->text ? DiffStatus::within_tolerance : DiffStatus::value_mismatch;
    } else if (r->shape != c->shape) {
      d.status = DiffStatus::shape_mismatch;
    } else if (r->dtype != c->dtype) {
      d.status = DiffStatus::dtype_mismatch;
    } else {
      detail::ErrorAccumulator acc{options.atol, options.rtol};
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
    if (options.progress) options.progress(++done, pending.size());
  }
  for (std::size_t i = 0; i < report.tensors.size(); ++i) {
    if (report.tensors[i].diverges()) {
      report.first_divergence = i;
      break;
    }
  }
  return report;
}

inline std::string DiffReport::text(bool all, std::size_t worst) const {
  using detail::number_text;
  std::string out;
  out += "reference: " + reference_file.string() + " (" + reference_values + " values, " + std::to_string(reference_calls) +
         " module calls)\n";
  out += "candidate: " + candidate_file.string() + " (" + candidate_values + " values, " + std::to_string(candidate_calls) +
         " module calls)\n";
  out += "tolerance: |candidate - reference| <= " + number_text(atol, "%g") + " + " + number_text(rtol, "%g") +
         " * |reference|\n";
  if (precision_limited()) {
    out += "note: values compared as printed (print(tensor): 4 significant digits, edge items only above 1000 elements); "
           "precision is limited to the printed digits, each tolerance widened by half a unit in the last digit\n";
  }
  std::size_t tensor_count = 0, diverging = 0, structural = 0;
  for (const auto& t : tensors) {
    if (!t.is_tensor) continue;
    ++tensor_count;
    diverging += t.diverges() ? 1 : 0;
    structural += t.status == DiffStatus::shape_mismatch || t.status == DiffStatus::dtype_mismatch ? 1 : 0;
  }
  for (const auto& path : only_in_reference) out += "only in reference: " + path + "\n";
  for (const auto& path : only_in_candidate) out += "only in candidate: " + path + "\n";
  if (!first_divergence) {
    out += "no divergence: all " + std::to_string(tensor_count) + " tensors within tolerance\n";
  } else {
    const auto& t = tensors[*first_divergence];
    out += "first divergence: " + t.where() + "\n";
    out += "  " + std::string(to_string(t.status));
    if (t.status == DiffStatus::out_of_tolerance) {
      out += ": " + std::to_string(t.out_of_tolerance) + " of " + std::to_string(t.compared) + " " +
             (t.printed ? "printed values" : "elements") + ", max abs error " + number_text(t.max_abs_error) +
             ", max rel error " + number_text(t.max_rel_error) + ", cosine " + number_text(t.cosine_similarity, "%.6f");
    } else if (t.status == DiffStatus::shape_mismatch || t.status == DiffStatus::value_mismatch) {
      out += ": reference " + t.reference_shape + ", candidate " + t.candidate_shape;
    } else if (t.status == DiffStatus::dtype_mismatch) {
      out += ": reference " + t.reference_dtype + ", candidate " + t.candidate_dtype;
    }
    out += "\n";
    out += std::to_string(diverging) + " of " + std::to_string(tensor_count) + " tensors diverge (" +
           std::to_string(structural) + " shape/dtype mismatches); " + std::to_string(only_in_reference.size()) +
           " module calls only in reference, " + std::to_string(only_in_candidate.size()) + " only in candidate\n";
  }
  const auto rows = modules();
  if (!rows.empty() && worst > 0) {
    char line[512];
    std::size_t width = 6;
    for (std::size_t i = 0; i < rows.size() && i < worst; ++i) width = std::max(width, rows[i].module_path.size());
    out += "worst modules:\n";
    std::snprintf(line, sizeof line, "  %-*s %8s %22s %12s %12s %11s\n", static_cast<int>(width), "module", "tensors",
                  "out of tolerance", "max abs err", "max rel err", "min cosine");
    out += line;
    for (std::size_t i = 0; i < rows.size() && i < worst; ++i) {
      const auto& m = rows[i];
      const std::string count = std::to_string(m.out_of_tolerance) + "/" + std::to_string(m.compared);
      std::snprintf(line, sizeof line, "  %-*s %8zu %22s %12s %12s %11s\n", static_cast<int>(width), m.module_path.c_str(),
                    m.tensors, count.c_str(), number_text(m.max_abs_error).c_str(), number_text(m.max_rel_error).c_str(),
                    number_text(m.min_cosine_similarity, "%.6f").c_str());
      out += line;
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
        out += ", reference " + (t.reference_shape.empty() ? "-" : t.reference_shape + " " + t.reference_dtype) +
               ", candidate " + (t.candidate_shape.empty() ? "-" : t.candidate_shape + " " + t.candidate_dtype);
      }
      out += "\n";
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
  boost::json::array maps;
  for (const auto& r : renames) maps.push_back(boost::json::string(r.pattern + "=>" + r.replacement));
  out["maps"] = std::move(maps);
  out["precision_limited_to_printed_digits"] = precision_limited();
  out["within_tolerance"] = within_tolerance();
  if (first_divergence) {
    const auto& t = tensors[*first_divergence];
    out["first_divergence"] = {{"module_path", t.module_path}, {"call", t.call}, {"location", t.location},
                               {"status", to_string(t.status)}, {"index", *first_divergence}};
  } else {
    out["first_divergence"] = nullptr;
  }
  boost::json::array only_ref(only_in_reference.begin(), only_in_reference.end());
  boost::json::array only_cand(only_in_candidate.begin(), only_in_candidate.end());
  out["only_in_reference"] = std::move(only_ref);
  out["only_in_candidate"] = std::move(only_cand);
  boost::json::array module_rows;
  for (const auto& m : modules()) {
    module_rows.push_back(boost::json::object{{"module_path", m.module_path},
                                              {"tensors", m.tensors},
                                              {"diverging", m.diverging},
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
    boost::json::object row{{"module_path", t.module_path},
                            {"call", t.call},
                            {"location", t.location},
                            {"status", to_string(t.status)},
                            {"is_tensor", t.is_tensor},
                            {"printed", t.printed},
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
