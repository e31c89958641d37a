#pragma once
/// \file
/// The trace format of the model addition debugger, one owner for its names: the JSON keys of
/// a call node and of a tensor record, the file names of a trace, the stems of its tensor files.

#include <string>
#include <string_view>

namespace tracetorch::detail::trace_format {

// A call node: {"module_path": ..., "inputs": {...}, "children": [...]} or, on a leaf, "outputs".
inline constexpr char kModulePath[] = "module_path";
inline constexpr char kInputs[] = "inputs";
inline constexpr char kOutputs[] = "outputs";
inline constexpr char kChildren[] = "children";

// A call's inputs: {"args": [...], "kwargs": {...}}.
inline constexpr char kArgs[] = "args";
inline constexpr char kKwargs[] = "kwargs";

// A tensor record: {"shape": "torch.Size([2, 7])", "dtype": "torch.float32", "value": ..., "mean": ...}.
// "value" is "./<file>.safetensors" (use_repr=false) or the lines of print(tensor) (use_repr=true);
// the _SUMMARY.json leaves it out.
inline constexpr char kShape[] = "shape";
inline constexpr char kDtype[] = "dtype";
inline constexpr char kValue[] = "value";
// The statistics of a floating tensor, each Python's repr of a 0-d tensor: "tensor(-5.1862e-03)".
inline constexpr char kMean[] = "mean";
inline constexpr char kStd[] = "std";
inline constexpr char kMin[] = "min";
inline constexpr char kMax[] = "max";
inline constexpr const char* kStatistics[] = {kMean, kStd, kMin, kMax};
inline constexpr char kShapePrefix[] = "torch.Size([";
inline constexpr char kShapeSuffix[] = "])";
inline constexpr char kDtypePrefix[] = "torch.";
/// torch.complex32, torch.complex64, torch.complex128: compared part by part.
inline bool is_complex_dtype(std::string_view dtype) { return dtype.starts_with("torch.complex"); }

// A value's place in its call, as the reader names it: "inputs.args.0", "inputs.kwargs.mask.1", "outputs".
inline constexpr char kLocationSeparator = '.';

// The files of a trace: <Root>_debug_tree_FULL_TENSORS.json, <Root>_debug_tree_SUMMARY.json and,
// with use_repr=false, one <stem>.safetensors per tensor (the tensor under the key "data"),
// named in the JSON as "./<stem>.safetensors".
inline constexpr char kFullTensorsSuffix[] = "_debug_tree_FULL_TENSORS.json";
inline constexpr char kSummarySuffix[] = "_debug_tree_SUMMARY.json";
inline constexpr char kTensorFileExtension[] = ".safetensors";
inline constexpr char kTensorFilePrefix[] = "./";
inline constexpr char kTensorKey[] = "data";

// A multi-rank trace (tensor parallelism): <debug_path>/rank_<r>/ holds rank r's trace and its
// shard specs; rank 0 writes <debug_path>/tracetorch_ranks.json, the index of the ranks.
inline constexpr char kRankDirectoryPrefix[] = "rank_";
inline constexpr char kRankIndexFile[] = "tracetorch_ranks.json";
inline constexpr char kShardSpecFile[] = "tracetorch_shards.json";

// A tensor file's stem, transformers' naming: <module_path>[_call<N>]_inputs_args_0,
// <module_path>_inputs_kwargs_<name>, <module_path>_outputs, then _<index> or _<key> per level.
// The root's outputs are <Root>_outputs*, written as files but left out of the JSON.
inline constexpr char kCallStem[] = "_call";
inline constexpr char kInputsStem[] = "_inputs";
inline constexpr char kOutputsStem[] = "_outputs";
inline constexpr char kArgsStem[] = "_args_";
inline constexpr char kKwargsStem[] = "_kwargs_";
inline constexpr char kStemSeparator = '_';

inline std::string full_tensors_file_name(std::string_view root) { return std::string(root) + kFullTensorsSuffix; }
inline std::string summary_file_name(std::string_view root) { return std::string(root) + kSummarySuffix; }

/// "./<stem>.safetensors" -> "<stem>.safetensors": the file's name in the trace directory.
inline std::string_view tensor_file_name(std::string_view value) {
  return value.starts_with(kTensorFilePrefix) ? value.substr(std::string_view(kTensorFilePrefix).size()) : value;
}

}  // namespace tracetorch::detail::trace_format
