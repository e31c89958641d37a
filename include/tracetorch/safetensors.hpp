#pragma once
/// \file
/// Reading and writing `.safetensors` files: a u64 little-endian header length N, N bytes of
/// JSON header (`{"name": {"dtype": "F32", "shape": [2, 7], "data_offsets": [begin, end]}, ...,
/// "__metadata__": {"key": "value"}}`, offsets relative to the data), then the raw data.
///
/// \code
/// tracetorch::safetensors::save("x.safetensors", tensor);               // key "data"
/// auto x = tracetorch::safetensors::load_single("x.safetensors");
///
/// tracetorch::safetensors::Reader reader("model.safetensors");          // header only
/// for (const auto& info : reader.header().tensors) std::cout << info.name << "\n";
/// auto w = reader.load("norm.weight");                                  // reads that tensor only
/// \endcode
///
/// The writer produces the same bytes as the project's Python reference writer (keys sorted,
/// compact JSON with `ensure_ascii` escapes, `__metadata__` last, header padded with spaces to
/// a multiple of 8); several metadata entries come in key order, as a Python dict built in
/// that order gives. The reader validates like the safetensors loader and refuses anything
/// malformed with a tracetorch::Error naming the file and the cause. Where it differs: it
/// also refuses duplicate JSON keys (the safetensors loader keeps the last) and shapes whose
/// nonzero dims overflow int64 even when another dim is 0 (LibTorch's strides would); like
/// that loader it ignores unknown fields in an entry and reads `"__metadata__": null` as none.
///
/// The format itself (header parsing and validation, no LibTorch) is
/// detail/safetensors/format.hpp; its meeting with LibTorch is detail/safetensors/torch.hpp.

#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/error.hpp"
