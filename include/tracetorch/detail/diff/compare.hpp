#pragma once
/// \file
/// Comparing the aligned values of two traces: tensors from their files or as printed, each
/// pair by its tolerance (widened for bf16/fp16 against another float dtype), and values of
/// other kinds by their text. Sets each value's status and error statistics.

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/diff/align.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/trace_format/printed_numbers.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/diff/results.hpp"
#include "tracetorch/detail/diff/tensor_chunks.hpp"
#include "tracetorch/detail/trace_format/tensor_files.hpp"

namespace tracetorch::detail {

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

/// Compares two tensors element by element, a slice at a time, in double precision; a complex
/// element as its real and imaginary parts, each against its own tolerance.
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

/// Machine epsilon of a floating or complex dtype as the trace writes it ("torch.bfloat16"; a
/// complex dtype's is its parts'); 0 for others.
inline double dtype_epsilon(std::string_view dtype) {
  if (dtype == "torch.bfloat16") return 0x1p-7;
  if (dtype == "torch.float16" || dtype == "torch.complex32") return 0x1p-10;
  if (dtype == "torch.float32" || dtype == "torch.complex64") return 0x1p-23;
  if (dtype == "torch.float64" || dtype == "torch.complex128") return 0x1p-52;
  return 0;
}

/// bf16 or fp16 against another floating dtype (complex32 against another complex dtype): the
/// numbers are compared. float32 against float64 stays a dtype mismatch: a port computing in
/// another full precision is a bug to see; so does a complex tensor against a real one.
inline bool comparable_across_dtypes(std::string_view a, std::string_view b) {
  const auto reduced = [](std::string_view d) { return d == "torch.bfloat16" || d == "torch.float16" || d == "torch.complex32"; };
  using trace_format::is_complex_dtype;
  return dtype_epsilon(a) > 0 && dtype_epsilon(b) > 0 && is_complex_dtype(a) == is_complex_dtype(b) && (reduced(a) || reduced(b));
}


/// The tolerance options a pair is judged by: DiffOptions' atol, rtol and precision_tolerance.
struct Tolerance {
  double atol = 0, rtol = 0;
  bool precision_tolerance = true;
};

/// (atol, rtol) for one pair: the options', raised to twice the epsilon of the pair's lower precision.
inline std::pair<double, double> pair_tolerance(std::string_view a, std::string_view b, const Tolerance& options) {
  if (!options.precision_tolerance) return {options.atol, options.rtol};
  const double floor = 2 * std::max(dtype_epsilon(a), dtype_epsilon(b));
  return {std::max(options.atol, floor), std::max(options.rtol, floor)};
}

/// Two tensors of the same shape and comparable dtypes: from their files where both have one
/// (a chunk at a time: tensor_chunks.hpp), else as printed.
inline void compare_tensor_pair(const Trace& ref, const TraceSlot& r, const Trace& cand, const TraceSlot& c, TensorDiff& d,
                                const Tolerance& tolerance) {
  std::tie(d.atol, d.rtol) = pair_tolerance(r.dtype, c.dtype, tolerance);
  ErrorAccumulator acc{d.atol, d.rtol};
  if (!r.file.empty() && !c.file.empty()) {
    for_each_chunk_pair(ref, r, cand, c, [&](const torch::Tensor& b, const torch::Tensor& a) { compare_tensors(a, b, acc); });
    acc.store(d);
  } else {
    d.printed = true;
    compare_printed(ref, r, cand, c, d, acc);
  }
}

/// Judges one aligned value: its sides described (shape or text, dtype), then its status.
inline TensorDiff compare_value(const Trace& ref, const Trace& cand, AlignedValue& value, const Tolerance& tolerance) {
  TensorDiff d = std::move(value.diff);
  const TraceSlot* r = value.reference;
  const TraceSlot* c = value.candidate;
  if (r != nullptr) d.reference_shape = r->is_tensor ? shape_for_message(r->shape) : r->text;
  if (c != nullptr) d.candidate_shape = c->is_tensor ? shape_for_message(c->shape) : c->text;
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
  } else if (r->dtype != c->dtype && !comparable_across_dtypes(r->dtype, c->dtype)) {
    d.status = DiffStatus::dtype_mismatch;
  } else if (r->overwritten_by || c->overwritten_by) {
    // Its file holds another call's tensor: the shape and dtype recorded in the JSON are all
    // there is to compare, never that other call's numbers.
    d.status = DiffStatus::overwritten;
  } else {
    compare_tensor_pair(ref, *r, cand, *c, d, tolerance);
  }
  return d;
}

/// Compares the aligned values one pair at a time, so that progress can count them and one
/// pair at a time is in memory; `progress` (if set) is called with (done, total) after each.
inline std::vector<TensorDiff> compare_aligned(const Trace& ref, const Trace& cand, std::vector<AlignedValue>& values,
                                               const Tolerance& tolerance,
                                               const std::function<void(std::size_t, std::size_t)>& progress) {
  std::vector<TensorDiff> out;
  std::size_t done = 0;
  for (auto& value : values) {
    out.push_back(compare_value(ref, cand, value, tolerance));
    if (progress) progress(++done, values.size());
  }
  return out;
}

}  // namespace tracetorch::detail
