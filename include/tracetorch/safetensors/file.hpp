#pragma once
/// \file
/// The public safetensors API (tracetorch::safetensors: Header, Reader, load, save) with LibTorch
/// tensors; documented in tracetorch/safetensors.hpp. Here so that detail code (the debugger, the
/// diff) can read and write tensor files without including a public header.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/fs/atomic_file.hpp"
#include "tracetorch/detail/safetensors/format.hpp"
#include "tracetorch/detail/safetensors/torch.hpp"
#include "tracetorch/detail/fs/stdio_file.hpp"
#include "tracetorch/detail/text/message_text.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::safetensors {

/// Tensors to save, by name (any order: the file holds them sorted).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// One tensor's header entry: `name`, `dtype` (LibTorch's; Undefined until read), `shape`, and
/// `begin`, `end`: its data_offsets, relative to Header::data_start.
using TensorInfo = detail::BasicTensorInfo<c10::ScalarType, c10::ScalarType::Undefined>;

/// A validated header: `tensors` in data-offset order, `metadata`, `data_start` (8 + the header's
/// length: where data offset 0 lies in the file) and `file_size`.
using Header = detail::BasicHeader<TensorInfo>;

/// Parses and validates a header from the first bytes of a file of `file_size` bytes.
/// `bytes` must hold at least the 8-byte length and the header it announces (the whole file
/// will do). Pure: reads nothing else, so it suits a fuzzer. Everything the header and the
/// file size determine is checked: limits, JSON, fields, dtypes, shapes, offsets contiguous
/// from 0, sizes, and that the last tensor ends exactly at the end of the file.
/// Throws tracetorch::Error("tracetorch: <file_name>: <cause>") on any violation.
///
/// \code
/// std::vector<unsigned char> bytes = ...;  // the file's first bytes, or all of it
/// const auto header = tracetorch::safetensors::parse_header(bytes, bytes.size(), "x.safetensors");
/// \endcode
inline Header parse_header(std::span<const unsigned char> bytes, std::uint64_t file_size, std::string_view file_name) {
  auto parsed = detail::parse_safetensors_header(bytes, file_size, file_name);
  Header header;
  header.tensors.reserve(parsed.tensors.size());
  for (auto& entry : parsed.tensors) {
    header.tensors.push_back({std::move(entry.name), detail::safetensors_scalar_type(*entry.dtype),
                              std::move(entry.shape), entry.begin, entry.end});
  }
  header.metadata = std::move(parsed.metadata);
  header.data_start = parsed.data_start;
  header.file_size = parsed.file_size;
  return header;
}

/// A safetensors file whose header has been read and validated; tensors are read one at a
/// time on request, so memory stays bounded by the largest tensor asked for. Each load()
/// reopens the file (load() is const and safe to call from several threads) and refuses to
/// read if the file's size changed since the header was parsed.
///
/// \code
/// tracetorch::safetensors::Reader reader("model.safetensors");
/// torch::Tensor w;
/// if (reader.contains("norm.weight")) w = reader.load("norm.weight");
/// \endcode
class Reader {
 public:
  explicit Reader(std::filesystem::path path) : path_(std::move(path)) {
    auto [file, size] = detail::open_for_reading(path_);
    unsigned char prefix[8] = {};
    const std::uint64_t available = std::min<std::uint64_t>(size, 8);
    detail::read_exactly(file.get(), path_, 0, prefix, available);
    const std::uint64_t length =
        detail::safetensors_header_length(std::span<const unsigned char>(prefix, available), size, path_.string());
    std::vector<unsigned char> bytes(8 + length);
    std::copy(prefix, prefix + 8, bytes.begin());
    detail::read_exactly(file.get(), path_, 8, bytes.data() + 8, length);
    header_ = parse_header(bytes, size, path_.string());
    for (std::size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
  }

  const std::filesystem::path& path() const { return path_; }
  const Header& header() const { return header_; }
  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }

  /// The header entry of `name`; throws Error naming the file and tensor if there is none.
  const TensorInfo& info(std::string_view name) const {
    const auto found = index_.find(name);
    if (found == index_.end()) {
      throw Error("tracetorch: " + path_.string() + ": no tensor " + detail::quoted_for_message(name));
    }
    return header_.tensors[found->second];
  }

  /// Reads one tensor (CPU, contiguous, its stored dtype).
  torch::Tensor load(std::string_view name) const {
    const auto& wanted = info(name);
    const auto file = open_unchanged();
    return read(file.get(), wanted, 0, wanted.shape, wanted.end - wanted.begin);
  }

  /// Reads `count` elements of `name`, from its element `first` on in row-major order, as a 1-d
  /// tensor of its dtype: a tensor larger than memory read a slice at a time (tracetorch-diff
  /// compares tensor files so). Throws Error naming the file and tensor where the range is not
  /// inside the tensor.
  ///
  /// \code
  /// const auto n = reader.info("data").end - reader.info("data").begin;  // bytes; numel for U8
  /// torch::Tensor head = reader.load_elements("data", 0, 1024);
  /// \endcode
  torch::Tensor load_elements(std::string_view name, std::int64_t first, std::int64_t count) const {
    const auto& wanted = info(name);
    const std::int64_t numel = c10::multiply_integers(wanted.shape);
    if (first < 0 || count < 0 || first > numel || count > numel - first) {
      throw Error("tracetorch: " + path_.string() + ": tensor " + detail::quoted_for_message(name) + " has " +
                  std::to_string(numel) + " elements: elements " + std::to_string(first) + " to " +
                  std::to_string(first + count) + " are not inside it");
    }
    const std::uint64_t size = c10::elementSize(wanted.dtype);
    const auto file = open_unchanged();
    return read(file.get(), wanted, std::uint64_t(first) * size, {count}, std::uint64_t(count) * size);
  }

  /// Reads every tensor, through one open file.
  std::map<std::string, torch::Tensor> load_all() const {
    std::map<std::string, torch::Tensor> out;
    const auto file = open_unchanged();
    for (const auto& info : header_.tensors) out.emplace(info.name, read(file.get(), info, 0, info.shape, info.end - info.begin));
    return out;
  }

 private:
  detail::UniqueFile open_unchanged() const {
    auto [file, size] = detail::open_for_reading(path_);
    if (size != header_.file_size) {
      throw Error("tracetorch: " + path_.string() + ": file changed since its header was read (" +
                  std::to_string(header_.file_size) + " bytes then, " + std::to_string(size) + " now)");
    }
    return std::move(file);
  }

  /// Reads `bytes` bytes of `info`'s data from its byte `skip` on, as a tensor of `shape`.
  torch::Tensor read(std::FILE* file, const TensorInfo& info, std::uint64_t skip, c10::IntArrayRef shape,
                     std::uint64_t bytes) const {
    // BOOL is read as bytes and compared with 0: a stored byte other than 0/1 must not become
    // an invalid bool (the reference loader does the same via .to(torch.bool)).
    const bool is_bool = info.dtype == c10::ScalarType::Bool;
    torch::Tensor tensor;
    try {
      tensor = torch::empty(shape, torch::TensorOptions().dtype(is_bool ? c10::ScalarType::Byte : info.dtype));
      if (bytes != 0) detail::read_exactly(file, path_, header_.data_start + info.begin + skip, tensor.data_ptr(), bytes);
      return is_bool ? tensor.ne(0) : tensor;
    } catch (const c10::Error& error) {  // "DefaultCPUAllocator: can't allocate memory": the file named
      throw Error("tracetorch: " + path_.string() + ": cannot hold tensor " + detail::quoted_for_message(info.name) + " (" +
                  std::to_string(bytes) + " bytes) in memory: " + error.what_without_backtrace());
    } catch (const std::bad_alloc&) {
      throw Error("tracetorch: " + path_.string() + ": cannot hold tensor " + detail::quoted_for_message(info.name) + " (" +
                  std::to_string(bytes) + " bytes) in memory: out of memory");
    }
  }

  std::filesystem::path path_;
  Header header_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

/// Every tensor in the file, by name.
///
/// \code
/// for (const auto& [name, tensor] : tracetorch::safetensors::load("model.safetensors")) use(name, tensor);
/// \endcode
inline std::map<std::string, torch::Tensor> load(const std::filesystem::path& path) { return Reader(path).load_all(); }

/// The tensor stored under `key` (the debugger's per-tensor files use "data").
///
/// \code
/// torch::Tensor x = tracetorch::safetensors::load_single("x.safetensors");
/// \endcode
inline torch::Tensor load_single(const std::filesystem::path& path, std::string_view key = "data") {
  return Reader(path).load(key);
}

/// Writes `tensors` (any device, layout strided, any strides) and `metadata` to `path`,
/// byte for byte as the reference writer does: entries sorted by name, data in that order.
/// The file appears only once complete (written beside it, then renamed). Throws Error for
/// duplicate or invalid (non-UTF-8, "__metadata__") names, dtypes safetensors cannot hold,
/// undefined or sparse tensors, and I/O failures.
///
/// \code
/// tracetorch::safetensors::save("model.safetensors", {{"w", w}, {"b", b}}, {{"format", "pt"}});
/// \endcode
inline void save(const std::filesystem::path& path, const NamedTensors& tensors,
                 const std::map<std::string, std::string>& metadata = {}) {
  detail::AtomicFileWriter writer(path);
  detail::write_safetensors(writer, path, tensors, metadata);
  writer.commit();
}

/// Writes one tensor under the key "data", the layout of the debugger's per-tensor files.
///
/// \code
/// tracetorch::safetensors::save("x.safetensors", torch::ones({2, 3}));
/// \endcode
inline void save(const std::filesystem::path& path, const torch::Tensor& tensor) {
  save(path, NamedTensors{{"data", tensor}});
}

}  // namespace tracetorch::safetensors
