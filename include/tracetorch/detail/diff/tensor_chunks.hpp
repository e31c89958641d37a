#pragma once
/// \file
/// Two trace tensor files read side by side a chunk of elements at a time, so that the diff
/// compares tensors of any size (one larger than memory included) in bounded memory.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/detail/trace_format/tensor_files.hpp"

namespace tracetorch::detail {

/// Elements read from each file at a time: at most 8 MiB of a file (F64, C64), whatever the
/// tensor's size.
inline constexpr std::int64_t kTraceTensorChunkElements = std::int64_t{1} << 20;

/// A trace tensor's file whose header has been read and checked against the JSON record; its
/// data is read a chunk at a time. Errors name the file.
class TraceTensorFile {
 public:
  TraceTensorFile(const Trace& trace, const TraceSlot& slot)
      : reader_(trace.dir / trace_format::tensor_file_name(slot.file)) {
    const auto& info = reader_.info(trace_format::kTensorKey);
    check_trace_tensor(trace, slot, reader_.path(), info.shape, info.dtype);
    numel_ = c10::multiply_integers(info.shape);
  }

  std::int64_t numel() const noexcept { return numel_; }

  /// The elements [first, first + kTraceTensorChunkElements) that the tensor has, flattened.
  torch::Tensor chunk(std::int64_t first) const {
    return reader_.load_elements(trace_format::kTensorKey, first, std::min(kTraceTensorChunkElements, numel_ - first));
  }

 private:
  safetensors::Reader reader_;
  std::int64_t numel_ = 0;
};

/// Calls `compare(reference_chunk, candidate_chunk)` on the two files of a pair of slots of one
/// shape, chunk after chunk: the memory held is a few chunks, never a whole tensor.
template <class Compare>
void for_each_chunk_pair(const Trace& ref, const TraceSlot& r, const Trace& cand, const TraceSlot& c, Compare&& compare) {
  const TraceTensorFile reference(ref, r);
  const TraceTensorFile candidate(cand, c);
  for (std::int64_t first = 0; first < candidate.numel(); first += kTraceTensorChunkElements) {
    compare(reference.chunk(first), candidate.chunk(first));
  }
}

}  // namespace tracetorch::detail
