#pragma once
/// \file
/// The eager attention mask as transformers' masking_utils builds it (create_causal_mask and
/// create_sliding_window_causal_mask with the eager interface): which key each query may attend,
/// then 0 there and the dtype's minimum elsewhere.

#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// torch.finfo(dtype).min for the floating dtypes a mask can have.
inline double finfo_min(c10::ScalarType dtype) {
  if (!c10::isFloatingType(dtype)) {
    throw Error(std::string("create_causal_mask: the mask's dtype must be floating point, got ") + c10::toString(dtype));
  }
  double minimum = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, dtype, "finfo_min",
                                  [&] { minimum = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  return minimum;
}

/// The 2-d padding mask [batch, >= kv_offset + kv_length] as booleans over the key positions
/// kv_offset .. kv_offset + kv_length - 1; positions past its end count as padding (upstream pads
/// the mask with zeros there).
inline torch::Tensor padding_over_keys(const torch::Tensor& attention_mask, std::int64_t batch, const torch::Tensor& kv_index) {
  if (attention_mask.dim() != 2 || attention_mask.size(0) != batch) {
    throw Error("create_causal_mask: attention_mask must be [batch = " + std::to_string(batch) + ", kv] of 1/0, got " +
                c10::str(attention_mask.sizes()));
  }
  auto mask = attention_mask.to(torch::kBool);
  const auto needed = kv_index.numel() == 0 ? 0 : kv_index.max().item<std::int64_t>() + 1;
  if (needed > mask.size(1)) mask = torch::constant_pad_nd(mask, {0, needed - mask.size(1)}, 0);
  return mask.index({torch::indexing::Slice(), kv_index});  // [batch, kv]
}

/// [batch, 1, q, kv]: 0 where query i (at cache_position[i]) may attend key j (at kv_offset + j),
/// the dtype's minimum elsewhere. Causal: key <= query; with a window W also key > query - W;
/// with a 2-d attention_mask also key not padding. A 4-d attention_mask is returned as it is.
inline torch::Tensor create_causal_mask(const torch::Tensor& cache_position, std::int64_t batch, std::int64_t kv_length,
                                        std::int64_t kv_offset, const torch::Tensor& attention_mask,
                                        std::optional<std::int64_t> sliding_window, const torch::TensorOptions& options) {
  using torch::indexing::None;
  using torch::indexing::Slice;
  if (attention_mask.defined() && attention_mask.dim() == 4) return attention_mask;  // already built by the caller
  if (sliding_window && *sliding_window <= 0) throw Error("create_causal_mask: sliding_window must be > 0");
  const auto kv_index = torch::arange(kv_length, cache_position.options().dtype(torch::kInt64)) + kv_offset;
  const auto keys = kv_index.index({None, Slice()});
  const auto queries = cache_position.index({Slice(), None});
  auto allowed = keys <= queries;
  if (sliding_window) allowed = allowed & (keys > queries - *sliding_window);
  if (attention_mask.defined()) {
    allowed = (allowed.index({None}) & padding_over_keys(attention_mask, batch, kv_index).index({Slice(), None, Slice()}))
                  .index({Slice(), None});
  } else {
    allowed = allowed.index({None, None}).expand({batch, -1, -1, -1});
  }
  const auto zero = torch::zeros({}, options);
  return torch::where(allowed, zero, torch::Scalar(finfo_min(options.dtype().toScalarType())));
}

}  // namespace tracetorch::detail
