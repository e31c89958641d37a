#pragma once
/// \file
/// The bracketed body of a tensor's repr (torch's _tensor_str): which elements print shows and
/// reading just those from any device, layout or dtype; the layout is body_layout.hpp's.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tracetorch/detail/repr/body_layout.hpp"
#include "tracetorch/detail/repr/print_options.hpp"

namespace tracetorch::detail {

/// Per dimension, the indices print shows: first and last edgeitems when summarising a
/// dimension longer than 2 * edgeitems (as get_summarized_data keeps), else all.
inline std::vector<std::vector<std::int64_t>> shown_indices(c10::IntArrayRef sizes, bool summarize) {
  std::vector<std::vector<std::int64_t>> keep(sizes.size());
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    const std::int64_t n = sizes[d];
    if (summarize && n > 2 * kPrintEdgeItems) {
      for (std::int64_t i = 0; i < kPrintEdgeItems; ++i) keep[d].push_back(i);
      for (std::int64_t i = n - kPrintEdgeItems; i < n; ++i) keep[d].push_back(i);
    } else {
      for (std::int64_t i = 0; i < n; ++i) keep[d].push_back(i);
    }
  }
  return keep;
}

/// Calls sink(element) for every kept element of a CPU strided tensor, row-major, reading
/// through the strides so views need no copy.
template <class T, class Sink>
void for_each_shown(const torch::Tensor& t, const std::vector<std::vector<std::int64_t>>& keep, Sink&& sink) {
  const T* base = t.data_ptr<T>();
  const auto dims = static_cast<std::size_t>(t.dim());
  if (dims == 0) {
    sink(base[0]);
    return;
  }
  const auto strides = t.strides();
  std::vector<std::vector<std::int64_t>> offsets(dims);
  for (std::size_t d = 0; d < dims; ++d)
    for (const auto i : keep[d]) offsets[d].push_back(i * strides[d]);
  const auto& inner = offsets[dims - 1];
  std::vector<std::size_t> pos(dims, 0);
  for (;;) {
    std::int64_t outer = 0;
    for (std::size_t d = 0; d + 1 < dims; ++d) outer += offsets[d][pos[d]];
    for (const auto off : inner) sink(base[outer + off]);
    std::size_t d = dims - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++pos[d] < offsets[d].size()) break;
      pos[d] = 0;
    }
  }
}

/// Reads the complex elements of `t` into data.re / data.im, `sign` and `imag_sign` applied.
inline void read_shown_complex(const torch::Tensor& t, const std::vector<std::vector<std::int64_t>>& keep,
                               double sign, double imag_sign, ShownData& data) {
  const auto put_complex = [&](auto v) {
    data.re.push_back(sign * static_cast<double>(static_cast<float>(v.real())));
    data.im.push_back(sign * imag_sign * static_cast<double>(static_cast<float>(v.imag())));
  };
  if (t.scalar_type() == torch::kComplexFloat) {
    for_each_shown<c10::complex<float>>(t, keep, put_complex);
  } else if (t.scalar_type() == torch::kComplexHalf) {
    for_each_shown<c10::complex<c10::Half>>(t, keep, put_complex);
  } else {
    for_each_shown<c10::complex<double>>(t, keep, [&](c10::complex<double> v) {
      data.re.push_back(sign * v.real());
      data.im.push_back(sign * imag_sign * v.imag());
    });
  }
}

/// Reads the shown elements of `t` (CPU, strided, non-empty). The negative and conjugate
/// bits are applied while reading, as resolve_neg()/resolve_conj() would.
inline ShownData read_shown(const torch::Tensor& t, const std::vector<std::vector<std::int64_t>>& keep) {
  ShownData data;
  std::size_t count = 1;
  for (const auto& k : keep) count *= k.size();
  const double sign = t.is_neg() ? -1.0 : 1.0;
  const double imag_sign = t.is_conj() ? -1.0 : 1.0;
  if (!t.is_floating_point() && !t.is_complex()) data.ints.reserve(count);
  const auto real = [&] {
    data.kind = ShownData::Kind::floating;
    data.re.reserve(count);
  };
  const auto put_float = [&](auto v) { data.re.push_back(sign * static_cast<double>(static_cast<float>(v))); };
  const auto put_double = [&](double v) { data.re.push_back(sign * v); };
  const auto put_int = [&](auto v) {
    const auto i = static_cast<std::int64_t>(v);
    data.ints.push_back(sign < 0 ? -i : i);
  };
  switch (t.scalar_type()) {
    case torch::kFloat: real(); for_each_shown<float>(t, keep, put_float); break;
    case torch::kHalf: real(); for_each_shown<c10::Half>(t, keep, put_float); break;
    case torch::kBFloat16: real(); for_each_shown<c10::BFloat16>(t, keep, put_float); break;
    case torch::kDouble: real(); for_each_shown<double>(t, keep, put_double); break;
    case torch::kComplexFloat:
    case torch::kComplexHalf:
    case torch::kComplexDouble:
      data.kind = ShownData::Kind::complex;
      data.re.reserve(count);
      data.im.reserve(count);
      read_shown_complex(t, keep, sign, imag_sign, data);
      break;
    case torch::kBool:
      data.kind = ShownData::Kind::boolean;
      data.ints.reserve(count);
      for_each_shown<bool>(t, keep, [&](bool v) { data.ints.push_back(v ? 1 : 0); });
      break;
    case torch::kLong: data.kind = ShownData::Kind::integer; for_each_shown<std::int64_t>(t, keep, put_int); break;
    case torch::kInt: data.kind = ShownData::Kind::integer; for_each_shown<std::int32_t>(t, keep, put_int); break;
    case torch::kShort: data.kind = ShownData::Kind::integer; for_each_shown<std::int16_t>(t, keep, put_int); break;
    case torch::kChar: data.kind = ShownData::Kind::integer; for_each_shown<std::int8_t>(t, keep, put_int); break;
    case torch::kByte: data.kind = ShownData::Kind::integer; for_each_shown<std::uint8_t>(t, keep, put_int); break;
    default: {
      // Anything else is printed through float64, as the dtype's values would read.
      const auto converted = t.to(torch::kDouble);
      real();
      for_each_shown<double>(converted, keep, put_double);
      break;
    }
  }
  return data;
}

/// _tensor_str: the bracketed contents of a dense tensor, laid out for `indent`.
inline std::string tensor_body(torch::Tensor t, std::int64_t indent) {
  if (t.numel() == 0) return "[]";
  const bool summarize = t.numel() > kPrintThreshold;
  if (t._is_zerotensor()) t = t.clone();  // a ZeroTensor has no storage to read
  if (t.is_quantized()) t = t.dequantize();
  const auto sizes = t.sizes().vec();

  std::vector<std::vector<std::int64_t>> keep;
  if (t.device().is_cpu() && t.layout() == torch::kStrided) {
    keep = shown_indices(sizes, summarize);
  } else {
    // Elsewhere, cut the shown part out on the device first so only it crosses to the host.
    if (t.layout() != torch::kStrided) t = t.to_dense();
    if (summarize) {
      for (std::int64_t d = 0; d < t.dim(); ++d) {
        const auto n = t.size(d);
        if (n > 2 * kPrintEdgeItems)
          t = torch::cat({t.narrow(d, 0, kPrintEdgeItems), t.narrow(d, n - kPrintEdgeItems, kPrintEdgeItems)}, d);
      }
    }
    t = t.cpu();
    keep = shown_indices(t.sizes(), false);
  }
  const ShownData data = read_shown(t, keep);
  std::string out;
  out.reserve(64 + (data.re.size() + data.ints.size()) * 14 + data.im.size() * 12);
  BodyWriter(data, sizes, summarize).write(out, indent);
  return out;
}

}  // namespace tracetorch::detail
