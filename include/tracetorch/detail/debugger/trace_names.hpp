#pragma once
/// \file
/// The keys and file-name pieces of transformers' trace that the debugger writes, each spelled
/// once: the Python reader and tracetorch-diff look for exactly these.

#include <string_view>

namespace tracetorch::detail::trace_names {

// Keys of a call node.
inline constexpr std::string_view kModulePath = "module_path";
inline constexpr std::string_view kInputs = "inputs";
inline constexpr std::string_view kOutputs = "outputs";
inline constexpr std::string_view kChildren = "children";
inline constexpr std::string_view kArgs = "args";
inline constexpr std::string_view kKwargs = "kwargs";

// Keys of a tensor record.
inline constexpr std::string_view kShape = "shape";
inline constexpr std::string_view kDtype = "dtype";
inline constexpr std::string_view kValue = "value";
inline constexpr std::string_view kMean = "mean";
inline constexpr std::string_view kStd = "std";
inline constexpr std::string_view kMin = "min";
inline constexpr std::string_view kMax = "max";

// The JSON files: `<root name><suffix>` in debug_path.
inline constexpr std::string_view kFullTensorsSuffix = "_debug_tree_FULL_TENSORS.json";
inline constexpr std::string_view kSummarySuffix = "_debug_tree_SUMMARY.json";

// Tensor file stems: `<module path>[_call<N>]_<inputs|outputs>`, then `_args_<i>` or
// `_kwargs_<name>`, then `_<index>` or `_<key>` per nested level.
inline constexpr std::string_view kInputsStem = "_inputs";
inline constexpr std::string_view kOutputsStem = "_outputs";
inline constexpr std::string_view kArgsStem = "_args_";
inline constexpr std::string_view kKwargsStem = "_kwargs_";
inline constexpr std::string_view kCallStem = "_call";
inline constexpr char kStemSeparator = '_';

// Tensor files (use_repr=false): `<stem>.safetensors`, the tensor under one key, and the JSON
// `value` naming the file relative to debug_path.
inline constexpr std::string_view kTensorFileExtension = ".safetensors";
inline constexpr std::string_view kTensorFileKey = "data";
inline constexpr std::string_view kTensorFileValuePrefix = "./";

}  // namespace tracetorch::detail::trace_names
