#pragma once
/// \file
/// The statistics of a float tensor's record (mean, std, min, max) as transformers' debugger
/// prints them, with fast paths for contiguous float32 CPU tensors that print the same.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#if defined(__SSE__)
#include <xmmintrin.h>  // min_max
#endif

#include "tracetorch/detail/debugger/call_json.hpp"  // set_text
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/repr/tensor_repr.hpp"

namespace tracetorch::detail {

/// The sum of (double(x) - mean)^2 over `count` floats, as LibTorch's std() of a whole float
/// CPU tensor computes it (mean being the tensor's float mean()), but in eight interleaved
/// partial sums that the compiler vectorises (docs/performance.md). The float std that follows is
/// LibTorch's except where the two double sums, both within ~count x 1e-16 of the exact one,
/// fall on either side of a float rounding boundary (none in the tests' random tensors).
inline double squared_deviations(const float* data, std::int64_t count, double mean) {
  constexpr std::int64_t kLanes = 8;
  double sums[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (std::int64_t k = 0; k < kLanes; ++k) {
      const double deviation = static_cast<double>(data[i + k]) - mean;
      sums[k] += deviation * deviation;
    }
  }
  double rest = 0;  // a sum of its own: updating sums[0] here would keep the loop above scalar
  for (; i < count; ++i) {
    const double deviation = static_cast<double>(data[i]) - mean;
    rest += deviation * deviation;
  }
  return (((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))) + rest;
}

/// The least and greatest of `count` (> 0) floats, both NaN where any is NaN, as LibTorch's
/// aminmax() finds them (of -0.0 and 0.0 either may come back). With SSE, eight at a time:
/// GCC does not vectorise the comparisons itself (they are not IEEE min/max), and the scalar
/// loop was slower than the LibTorch call it replaced.
inline std::pair<float, float> min_max(const float* data, std::int64_t count) {
  std::int64_t i = 0;
  float low = data[0], high = data[0];
  bool nan = false;
#if defined(__SSE__)
  if (count >= 8) {
    // minps(x, m) is `x < m ? x : m`: a NaN x leaves m as it was, so NaNs are counted apart.
    __m128 low0 = _mm_set1_ps(data[0]), low1 = low0, high0 = low0, high1 = low0;
    __m128 nan0 = _mm_setzero_ps(), nan1 = nan0;
    for (; i + 8 <= count; i += 8) {
      const __m128 a = _mm_loadu_ps(data + i), b = _mm_loadu_ps(data + i + 4);
      low0 = _mm_min_ps(a, low0);
      low1 = _mm_min_ps(b, low1);
      high0 = _mm_max_ps(a, high0);
      high1 = _mm_max_ps(b, high1);
      nan0 = _mm_or_ps(nan0, _mm_cmpunord_ps(a, a));
      nan1 = _mm_or_ps(nan1, _mm_cmpunord_ps(b, b));
    }
    alignas(16) float lows[8], highs[8];
    _mm_store_ps(lows, low0);
    _mm_store_ps(lows + 4, low1);
    _mm_store_ps(highs, high0);
    _mm_store_ps(highs + 4, high1);
    for (int k = 0; k < 8; ++k) {
      low = lows[k] < low ? lows[k] : low;
      high = highs[k] > high ? highs[k] : high;
    }
    nan = _mm_movemask_ps(_mm_or_ps(nan0, nan1)) != 0;
  }
#endif
  for (; i < count; ++i) {
    low = data[i] < low ? data[i] : low;
    high = data[i] > high ? data[i] : high;
    nan |= data[i] != data[i];
  }
  if (nan) return {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
  return {low, high};
}

/// Whether add_statistics reads `tensor`'s floats itself instead of asking LibTorch.
inline bool has_float32_fast_path(const torch::Tensor& tensor) {
  return tensor.scalar_type() == torch::kFloat32 && tensor.device().is_cpu() && tensor.layout() == c10::kStrided &&
         tensor.is_contiguous() && !tensor.is_neg() && tensor.numel() > 0;
}

/// add_statistics of a tensor that has_float32_fast_path: the same text, from one sum() and two
/// passes over the floats.
inline void add_float32_statistics(boost::json::object& record, const torch::Tensor& tensor) {
  const auto count = tensor.numel();
  const float* data = tensor.data_ptr<float>();
  // LibTorch's mean() of a float CPU tensor is its float sum() divided, in float, by the
  // count (ReduceOps.cpp, mean_out): the same two steps here skip its second operation.
  const float mean = *torch::sum(tensor).data_ptr<float>() / static_cast<float>(count);
  set_text(record[trace_format::kMean], scalar_tensor_repr(mean, torch::kFloat32));
  const double sum = squared_deviations(data, count, mean);
  const double variance = sum / static_cast<double>(std::max<std::int64_t>(0, count - 1));
  set_text(record[trace_format::kStd], scalar_tensor_repr(static_cast<float>(std::sqrt(variance)), torch::kFloat32));
  // Where the answer is zero, min()/max() are asked again: which of -0.0 and 0.0 each
  // returns depends on its own order of visits.
  const auto [min_value, max_value] = min_max(data, count);
  set_text(record[trace_format::kMin], min_value == 0 ? tensor_repr(tensor.min()) : scalar_tensor_repr(min_value, torch::kFloat32));
  set_text(record[trace_format::kMax], max_value == 0 ? tensor_repr(tensor.max()) : scalar_tensor_repr(max_value, torch::kFloat32));
}

/// mean, std, min and max as transformers' debugger prints them (repr of each 0-d tensor).
inline void add_statistics(boost::json::object& record, const torch::Tensor& tensor) {
  if (has_float32_fast_path(tensor)) {
    add_float32_statistics(record, tensor);
    return;
  }
  const auto stat = [&](std::string_view name, auto&& compute) {
    try {
      set_text(record[name], compute());
    } catch (const c10::Error&) {
      // An empty tensor has no min/max: Python raises there; the trace leaves them out.
    }
  };
  stat(trace_format::kMean, [&] { return tensor_repr(tensor.mean()); });
  stat(trace_format::kStd, [&] { return tensor_repr(tensor.std()); });
  // min()/max() copy a non-contiguous tensor first; for an expanded view (a stride-0
  // dimension) that copy can be far larger than the tensor's memory, so amin()/amax()
  // read it in place (they differ only in which zero they return among -0.0 and 0.0).
  bool expanded = false;
  if (tensor.layout() == c10::kStrided) {  // sparse tensors have no strides
    for (std::int64_t d = 0; d < tensor.dim(); ++d) expanded |= tensor.stride(d) == 0 && tensor.size(d) > 1;
  }
  stat(trace_format::kMin, [&] { return tensor_repr(expanded ? tensor.amin() : tensor.min()); });
  stat(trace_format::kMax, [&] { return tensor_repr(expanded ? tensor.amax() : tensor.max()); });
}

}  // namespace tracetorch::detail
