#pragma once
/// \file
/// Where the safetensors format meets LibTorch: dtype names to c10::ScalarType and back, and
/// writing tensors' bytes after a header from safetensors_header_writer.hpp.

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/safetensors/format.hpp"
#include "tracetorch/detail/safetensors/header_writer.hpp"
#include "tracetorch/detail/text/message_text.hpp"

namespace tracetorch::detail {

// The data is written and read as raw bytes in host order; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "tracetorch's safetensors I/O assumes a little-endian host");

/// LibTorch's type for each of kSafetensorsDtypes, in the same order.
inline constexpr std::pair<std::string_view, c10::ScalarType> kSafetensorsScalarTypes[] = {
    {"F64", c10::ScalarType::Double}, {"F32", c10::ScalarType::Float},  {"F16", c10::ScalarType::Half},
    {"BF16", c10::ScalarType::BFloat16}, {"I64", c10::ScalarType::Long}, {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},  {"I8", c10::ScalarType::Char},   {"U8", c10::ScalarType::Byte},
    {"BOOL", c10::ScalarType::Bool},  {"C64", c10::ScalarType::ComplexFloat},
};

constexpr bool safetensors_scalar_types_match_format() {
  if (std::size(kSafetensorsScalarTypes) != std::size(kSafetensorsDtypes)) return false;
  for (std::size_t i = 0; i < std::size(kSafetensorsDtypes); ++i) {
    if (kSafetensorsScalarTypes[i].first != kSafetensorsDtypes[i].name) return false;
  }
  return true;
}
static_assert(safetensors_scalar_types_match_format(), "kSafetensorsScalarTypes must follow kSafetensorsDtypes");

inline c10::ScalarType safetensors_scalar_type(const SafetensorsDtype& dtype) {
  return kSafetensorsScalarTypes[static_cast<std::size_t>(&dtype - kSafetensorsDtypes)].second;
}

/// The format's dtype for `type`, or nullptr where safetensors cannot store it.
inline const SafetensorsDtype* safetensors_dtype(c10::ScalarType type) {
  for (std::size_t i = 0; i < std::size(kSafetensorsScalarTypes); ++i) {
    if (kSafetensorsScalarTypes[i].second == type) return &kSafetensorsDtypes[i];
  }
  return nullptr;
}

[[noreturn]] inline void save_failed(const std::filesystem::path& path, const std::string& cause) {
  throw Error("tracetorch: cannot save " + path.string() + ": " + cause);
}

using SafetensorsNamedTensor = std::pair<std::string, torch::Tensor>;

/// The tensors sorted by name, as the file holds them.
inline std::vector<const SafetensorsNamedTensor*> sorted_by_name(const std::vector<SafetensorsNamedTensor>& tensors) {
  std::vector<const SafetensorsNamedTensor*> sorted;
  sorted.reserve(tensors.size());
  for (const auto& item : tensors) sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  return sorted;
}

/// The format's dtype of a tensor that can be saved; refuses (save_failed) one that cannot.
inline const SafetensorsDtype& checked_for_saving(const std::filesystem::path& path, const std::string& name,
                                                  const torch::Tensor& tensor) {
  const std::string tensor_name = "tensor " + quoted_for_message(name);
  if (name == "__metadata__") save_failed(path, "\"__metadata__\" is reserved, not a tensor name");
  if (!tensor.defined()) save_failed(path, tensor_name + " is undefined");
  if (tensor.layout() != c10::kStrided) save_failed(path, tensor_name + " is not a dense (strided) tensor");
  if (tensor.device().is_meta()) save_failed(path, tensor_name + " is on the meta device and has no data");
  const auto* dtype = safetensors_dtype(tensor.scalar_type());
  if (dtype == nullptr) {
    save_failed(path, tensor_name + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                          ", which safetensors cannot store");
  }
  return *dtype;
}

/// The whole header JSON (padded) for `sorted`; every tensor is checked before anything is
/// written, so a refused save leaves nothing.
inline std::string safetensors_header_json(const std::filesystem::path& path,
                                           const std::vector<const SafetensorsNamedTensor*>& sorted,
                                           const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& [name, tensor] = *sorted[i];
    if (i != 0 && sorted[i - 1]->first == name) save_failed(path, "two tensors named " + quoted_for_message(name));
    const SafetensorsDtype& dtype = checked_for_saving(path, name, tensor);
    if (i != 0) json += ',';
    const auto bytes = static_cast<std::uint64_t>(tensor.numel()) * dtype.size;
    const auto sizes = tensor.sizes();
    if (!append_safetensors_entry(json, name, dtype, {sizes.data(), sizes.size()}, offset, offset + bytes)) {
      save_failed(path, "tensor " + quoted_for_message(name) + " is not valid UTF-8");
    }
    offset += bytes;
  }
  if (const std::string* bad = append_safetensors_metadata(json, metadata, !sorted.empty())) {
    save_failed(path, "metadata entry " + quoted_for_message(*bad) + " is not valid UTF-8");
  }
  finish_safetensors_header(json);
  return json;
}

/// A tensor's bytes as the file holds them: contiguous, on the CPU, lazy views resolved.
inline torch::Tensor safetensors_data(const std::filesystem::path& path, const SafetensorsNamedTensor& item) {
  torch::Tensor tensor = item.second.detach();
  try {
    // Lazy conjugate/negative views hold unmodified data; materialise them first.
    if (tensor.is_conj() || tensor.is_neg()) tensor = tensor.resolve_conj().resolve_neg();
    // A contiguous CPU tensor is written straight from its memory; anything else is copied
    // once into a contiguous CPU tensor (one tensor at a time, so at most one copy is alive).
    // Not tensor.to(kCPU, MemoryFormat::Contiguous): for a transposed CPU tensor that returns
    // the tensor itself.
    if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
      tensor = torch::empty(tensor.sizes(), tensor.options().device(torch::kCPU)).copy_(tensor);
    }
  } catch (const c10::Error& e) {
    save_failed(path, "tensor " + quoted_for_message(item.first) + ": cannot copy to the CPU: " +
                          e.what_without_backtrace());
  }
  return tensor;
}

/// The whole file into `writer` (anything with write(const void*, size_t) and
/// write(std::string_view), e.g. AtomicFileWriter); `path` names the file in errors. Nothing
/// is written before everything is checked.
template <class Writer>
void write_safetensors(Writer& writer, const std::filesystem::path& path, const std::vector<SafetensorsNamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto sorted = sorted_by_name(tensors);
  const std::string json = safetensors_header_json(path, sorted, metadata);
  const auto length = safetensors_length_prefix(json.size());
  writer.write(length.data(), length.size());
  writer.write(json);
  for (const auto* item : sorted) {
    if (item->second.numel() == 0) continue;
    const torch::Tensor tensor = safetensors_data(path, *item);
    writer.write(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()) * tensor.element_size());
  }
}

}  // namespace tracetorch::detail
