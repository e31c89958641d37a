// libFuzzer target: the safetensors header parser (detail::parse_safetensors_header, which
// tracetorch::safetensors::parse_header wraps) on arbitrary bytes taken as a whole file. Any
// input must either be refused with tracetorch::Error or give a header whose tensors lie
// inside the file and tile its data exactly: that is what lets Reader::load read without
// further bounds checks. The parser needs no LibTorch, and neither does this target.

#include <tracetorch/detail/safetensors/format.hpp>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto header = tracetorch::detail::parse_safetensors_header({data, size}, size, "fuzz.safetensors");
    if (header.data_start < 8 || header.data_start > size) __builtin_trap();
    std::uint64_t expected = 0;
    for (const auto& info : header.tensors) {
      if (info.begin != expected || info.end < info.begin || header.data_start + info.end > size) __builtin_trap();
      if (info.dtype == nullptr || tracetorch::detail::safetensors_dtype(info.dtype->name) != info.dtype) __builtin_trap();
      unsigned __int128 bytes = info.dtype->size;
      for (const auto dim : info.shape) {
        if (dim < 0) __builtin_trap();
        bytes *= static_cast<std::uint64_t>(dim);
        if (bytes > (static_cast<unsigned __int128>(1) << 64)) bytes = static_cast<unsigned __int128>(1) << 64;
      }
      if (bytes != info.end - info.begin) __builtin_trap();
      expected = info.end;
    }
    if (header.data_start + expected != size) __builtin_trap();
  } catch (const tracetorch::Error&) {
  }
  // The same bytes as a prefix of a longer file: the header must be judged against that size.
  if (size >= 8) {
    try {
      const auto header = tracetorch::detail::parse_safetensors_header({data, size}, size + 16, "fuzz.safetensors");
      if (header.tensors.empty() || header.tensors.back().end + header.data_start != size + 16) __builtin_trap();
    } catch (const tracetorch::Error&) {
    }
  }
  return 0;
}
