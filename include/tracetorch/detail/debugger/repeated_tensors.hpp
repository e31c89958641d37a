#pragma once
/// \file
/// Recognising a tensor that one forward records again unchanged (one module's output is the
/// next one's input), and the records of the tensors seen so far, so that each is encoded once.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tracetorch::detail {

/// A 64-bit hash of `size` bytes. Eight lanes of `(lane + word) * odd`: a change to any one
/// 8-byte word always changes its lane (an odd multiplier is invertible modulo 2^64), and the
/// independent lanes keep the loop at memory speed.
inline std::uint64_t content_hash(const void* data, std::size_t size) {
  constexpr std::uint64_t kOdd = 0x9E3779B97F4A7C15ull;
  constexpr std::size_t kLanes = 8;
  std::uint64_t lanes[kLanes];
  for (std::size_t k = 0; k < kLanes; ++k) lanes[k] = k + 1;
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + kLanes * 8 <= size; i += kLanes * 8) {
    for (std::size_t k = 0; k < kLanes; ++k) {
      std::uint64_t word;
      std::memcpy(&word, bytes + i + k * 8, 8);
      lanes[k] = (lanes[k] + word) * kOdd;
    }
  }
  std::uint64_t tail = size;  // the length, so that trailing zero bytes count
  for (; i < size; ++i) tail = (tail + bytes[i]) * kOdd;
  std::uint64_t hash = tail;
  for (const std::uint64_t lane : lanes) {
    hash ^= lane + 0x632BE59BD9B4E019ull + (hash << 6) + (hash >> 2);
  }
  // splitmix64's finaliser, so that every input bit reaches every output bit.
  hash = (hash ^ (hash >> 30)) * 0xBF58476D1CE4E5B9ull;
  hash = (hash ^ (hash >> 27)) * 0x94D049BB133111EBull;
  return hash ^ (hash >> 31);
}

/// What a record of a tensor depends on, taken so that two fingerprints that are `same_as`
/// each other give the same record: the same memory read the same way, not written since
/// (LibTorch's version counter counts in-place operations), and the same bytes (the hash
/// catches writes LibTorch does not count, through data_ptr() or `.data()`).
struct TensorFingerprint {
  /// Keeps the StorageImpl's address from being reused while the fingerprint lives, without
  /// keeping the tensor's memory.
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  std::int64_t storage_offset = 0;
  // Contiguous, so the strides follow from the sizes. Inline for up to 6 dimensions: a
  // fingerprint lives until the forward returns, and heap memory held that long is what
  // forward_memory.hpp keeps out of malloc's heap.
  c10::SmallVector<std::int64_t, 6> sizes;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool negative = false;
  bool conjugate = false;
  std::int64_t version = 0;
  std::uint64_t content = 0;

  const c10::StorageImpl* address() const noexcept { return storage._unsafe_get_target(); }

  bool same_as(const TensorFingerprint& other) const {
    return address() == other.address() && storage_offset == other.storage_offset && sizes == other.sizes &&
           dtype == other.dtype && negative == other.negative && conjugate == other.conjugate &&
           version == other.version && content == other.content;
  }
};

/// The fingerprint of `tensor`, or nullopt where a record could differ for reasons the
/// fingerprint does not hold: tensors off the CPU (reading them costs a copy), without
/// ordinary strided storage (sparse, MKL-DNN), not contiguous, quantized (scale and zero point
/// live outside the storage), with requires_grad or a grad_fn or dimension names (printed by
/// repr), and inference tensors (they have no version counter).
inline std::optional<TensorFingerprint> fingerprint(const torch::Tensor& tensor) {
  if (!tensor.defined() || !tensor.device().is_cpu() || tensor.layout() != c10::kStrided || !tensor.has_storage() ||
      tensor.is_quantized() || tensor.requires_grad() || tensor.has_names() || tensor.is_inference() ||
      !tensor.is_contiguous()) {
    return std::nullopt;
  }
  const auto& storage = tensor.storage();
  const auto bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
  if (bytes > 0 && storage.data() == nullptr) return std::nullopt;
  TensorFingerprint result{storage.getWeakStorageImpl()};
  result.storage_offset = tensor.storage_offset();
  result.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  result.dtype = tensor.scalar_type();
  result.negative = tensor.is_neg();
  result.conjugate = tensor.is_conj();
  result.version = tensor._version();
  result.content = content_hash(bytes > 0 ? tensor.data_ptr() : nullptr, bytes);
  return result;
}

/// A tensor one forward has encoded, for DebuggerOptions::reuse_repeated_tensors.
struct EncodedTensor {
  TensorFingerprint fingerprint;
  boost::json::object record;  // use_repr=true: "value" is null, the lines are in `printed`
  std::pmr::string printed;
  std::size_t file_index;  // use_repr=false: its file among the forward's staged files
};

/// The tensors one forward has encoded, by the address of their storage. Lives in the forward's
/// memory (forward_memory.hpp) and ends with the forward.
class EncodedTensors {
 public:
  explicit EncodedTensors(std::pmr::memory_resource* memory) : by_storage_(memory) {}

  /// The earlier record of the tensor `identity` fingerprints, or null.
  const EncodedTensor* find(const TensorFingerprint& identity) const {
    const auto [begin, end] = by_storage_.equal_range(identity.address());
    for (auto it = begin; it != end; ++it) {
      if (it->second.fingerprint.same_as(identity)) return &it->second;
    }
    return nullptr;
  }

  /// Keeps `record`, of the tensor `identity` fingerprints, with its print or its file.
  void add(TensorFingerprint identity, boost::json::object record, std::string_view printed, std::size_t file_index) {
    const c10::StorageImpl* address = identity.address();  // before the move below
    std::pmr::string kept_print(printed, by_storage_.get_allocator().resource());
    by_storage_.emplace(address, EncodedTensor{std::move(identity), std::move(record), std::move(kept_print), file_index});
  }

  /// Forgets the tensors whose file is the `count`th staged file or a later one (removed).
  void forget_files_from(std::size_t count) {
    std::erase_if(by_storage_, [&](const auto& entry) { return entry.second.file_index >= count; });
  }

 private:
  std::pmr::unordered_multimap<const c10::StorageImpl*, EncodedTensor> by_storage_;
};

}  // namespace tracetorch::detail
