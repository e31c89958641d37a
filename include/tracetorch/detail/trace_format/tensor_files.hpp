#pragma once
/// \file
/// The tensor files of a use_repr=false trace: loading one (checked against its JSON record),
/// printing it as Python would, and finding the root's outputs, which only their files hold.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/trace_format/printed_numbers.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/repr/tensor_repr.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"
#include "tracetorch/detail/text/message_text.hpp"  // shape_for_message: "[2, 7, 64]"

namespace tracetorch::detail {

/// Checks a trace tensor's file (`path`, holding `sizes` of `type`) against what the JSON says.
inline void check_trace_tensor(const Trace& trace, const TraceSlot& slot, const std::filesystem::path& path,
                               c10::IntArrayRef sizes, c10::ScalarType type) {
  if (sizes.vec() != slot.shape) {
    throw Error("tracetorch: " + path.string() + ": holds shape " + shape_for_message(sizes.vec()) + " but " +
                trace.json_file.string() + " says " + shape_for_message(slot.shape));
  }
  if (dtype_repr(type) != slot.dtype) {
    throw Error("tracetorch: " + path.string() + ": holds " + dtype_repr(type) + " but " + trace.json_file.string() +
                " says " + slot.dtype);
  }
}

/// Loads a trace tensor's file and checks it against what the JSON says about it; a slot with a
/// slice gets its slice of the file's tensor.
inline torch::Tensor load_trace_tensor(const Trace& trace, const TraceSlot& slot) {
  const auto path = trace.dir / trace_format::tensor_file_name(slot.file);
  auto tensor = safetensors::load_single(path, trace_format::kTensorKey);
  if (!slot.slice) {
    check_trace_tensor(trace, slot, path, tensor.sizes(), tensor.scalar_type());
    return tensor;
  }
  TraceSlot full = slot;
  full.shape[static_cast<std::size_t>(slot.slice->dim)] = slot.slice->full;
  check_trace_tensor(trace, full, path, tensor.sizes(), tensor.scalar_type());
  return tensor.narrow(slot.slice->dim, slot.slice->offset, slot.slice->size).contiguous();
}

/// The printed numbers of a slot: its own lines, or its file's tensor printed as Python would.
inline std::vector<PrintedNumber> printed_numbers(const Trace& trace, const TraceSlot& slot, const std::string& where) {
  std::vector<std::string> lines = slot.lines;
  if (!slot.file.empty()) lines = tensor_print_lines(load_trace_tensor(trace, slot));
  std::vector<PrintedNumber> numbers;
  if (!parse_printed_numbers(lines, numbers)) {
    throw Error("tracetorch: " + trace.json_file.string() + ": " + where + ": value is not a printed tensor (" +
                (lines.empty() ? std::string("no lines") : lines[0].substr(0, 60)) + "), dtype " + slot.dtype.substr(0, 64));
  }
  return numbers;
}

/// How a trace holds its tensors' values: "safetensors", "printed", "mixed" or "none".
inline std::string values_kind(const Trace& trace) {
  if (trace.file_tensors == 0 && trace.printed_tensors == 0) return "none";
  if (trace.printed_tensors == 0) return "safetensors";
  return trace.file_tensors == 0 ? "printed" : "mixed";
}

/// The tensor files the trace's JSON names, by their names in the trace directory.
inline std::set<std::string> referenced_files(const Trace& trace) {
  std::set<std::string> referenced;
  for (const auto& call : trace.calls) {
    for (const auto* slots : {&call.inputs, &call.outputs}) {
      for (const auto& slot : *slots) {
        if (!slot.file.empty()) referenced.insert(std::string(trace_format::tensor_file_name(slot.file)));
      }
    }
  }
  return referenced;
}

/// A root output's file as a slot: "<Root>_outputs.safetensors" is "outputs",
/// "<Root>_outputs_last_hidden_state.safetensors" is "outputs.last_hidden_state".
inline TraceSlot root_output_slot(const Trace& trace, const std::string& name, const std::string& stem) {
  const safetensors::Reader reader(trace.dir / name);
  const auto& info = reader.info(trace_format::kTensorKey);
  TraceSlot slot;
  const std::string suffix = name.substr(stem.size(), name.size() - stem.size() - std::string_view(trace_format::kTensorFileExtension).size());
  slot.location = suffix.empty() ? std::string(trace_format::kOutputs)
                                 : trace_format::kOutputs + (trace_format::kLocationSeparator + suffix.substr(1));
  slot.is_tensor = true;
  slot.shape = info.shape;
  slot.dtype = dtype_repr(info.dtype);
  slot.file = trace_format::kTensorFilePrefix + name;
  slot.from_file_only = true;
  return slot;
}

/// The root's output tensors found as files: the debugger (transformers' and tracetorch's)
/// writes `<Root>_outputs*.safetensors` but leaves a call with children without outputs in
/// the JSON, so the model's own outputs would otherwise go uncompared. Only the headers are read.
inline std::vector<TraceSlot> root_output_files(const Trace& trace) {
  std::vector<TraceSlot> out;
  if (trace.calls.empty() || !trace.calls[0].outputs.empty()) return out;
  const std::set<std::string> referenced = referenced_files(trace);
  const std::string stem = trace.calls[0].module_path + trace_format::kOutputsStem;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(trace.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(trace_format::kTensorFileExtension) || referenced.count(name) != 0) continue;
    if (name == stem + trace_format::kTensorFileExtension || name.starts_with(stem + trace_format::kStemSeparator)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) out.push_back(root_output_slot(trace, name, stem));
  return out;
}

/// Appends the root's output files to its outputs, placed in execution order at its end.
inline void add_root_outputs(Trace& trace, std::vector<TraceSlot> slots) {
  if (slots.empty()) return;
  auto& root = trace.calls[0];
  for (auto& slot : slots) {
    slot.order = root.exit_order++;
    ++trace.file_tensors;
    root.outputs.push_back(std::move(slot));
  }
}

/// Adds the root's output files to both traces where both hold files. A printed trace has lost
/// them, and one side's files against nothing would read as missing values: then the note that
/// says why they are not compared. So does a pair of traces neither of which records them.
inline std::optional<std::string> include_root_outputs(Trace& ref, Trace& cand) {
  auto ref_roots = root_output_files(ref);
  auto cand_roots = root_output_files(cand);
  if (ref.file_tensors > 0 && cand.file_tensors > 0) {
    add_root_outputs(ref, std::move(ref_roots));
    add_root_outputs(cand, std::move(cand_roots));
  } else if (!ref_roots.empty() || !cand_roots.empty()) {
    return std::string("the root's outputs are not compared: the ") + (ref.file_tensors == 0 ? "reference" : "candidate") +
           " trace holds printed values, and the debugger leaves a root's outputs out of the JSON";
  }
  if (!ref.calls.empty() && !cand.calls.empty() && ref.calls[0].outputs.empty() && cand.calls[0].outputs.empty()) {
    return std::string("the root's outputs are not compared: neither trace records them (the debugger leaves a root's "
                       "outputs out of the JSON when it made other calls; only a use_repr=false trace keeps them, as "
                       "<Root>_outputs*.safetensors files)");
  }
  return std::nullopt;
}

}  // namespace tracetorch::detail
