#pragma once
/// \file
/// Tensor files that several values of a use_repr=false trace name: transformers' debugger
/// keeps one file per module path, so a module called several times in one forward (an MoE
/// block's `experts.act_fn`, once per expert) leaves the last call's tensor in a file that
/// every call's JSON names. The value the file holds is found; the others are marked as
/// overwritten, never compared against another call's tensor.

#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/safetensors/file.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"
#include "tracetorch/detail/text/message_text.hpp"
#include "tracetorch/detail/diff/compare.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/trace_format/printed_numbers.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"

namespace tracetorch::detail {

/// A value naming a file, and its call's index in Trace::calls.
struct FileReference {
  std::size_t call = 0;
  TraceSlot* slot = nullptr;
};

/// Whether `tensor`'s statistics agree with those `slot` records (Python's reprs of 0-d
/// tensors): each within its printed precision, widened by the tensor dtype's rounding (Python
/// computes them in that dtype). A slot without statistics agrees.
inline bool statistics_agree(const torch::Tensor& tensor, const TraceSlot& slot) {
  if (slot.stats.empty() || tensor.numel() == 0 || tensor.is_complex()) return true;
  const auto wide = tensor.to(torch::kDouble);
  const std::map<std::string, double> computed{{trace_format::kMean, wide.mean().item<double>()},
                                               {trace_format::kStd, tensor.numel() > 1 ? wide.std().item<double>() : std::nan("")},
                                               {trace_format::kMin, wide.min().item<double>()},
                                               {trace_format::kMax, wide.max().item<double>()}};
  const double relative = std::max(1e-5, 4 * dtype_epsilon(slot.dtype));
  for (const auto& [name, text] : slot.stats) {
    std::vector<PrintedNumber> printed;
    const auto found = computed.find(name);
    if (found == computed.end() || !parse_printed_numbers({text}, printed) || printed.size() != 1) continue;
    const double a = found->second, b = printed[0].value;
    if (std::isnan(a) || std::isnan(b) || std::isinf(b)) continue;  // nothing to tell values apart by
    if (std::fabs(a - b) > printed[0].half_unit + relative * std::fabs(b) + 1e-30) return false;
  }
  return true;
}

/// The value whose tensor a shared file holds: among those whose shape and dtype the file's
/// header has, the last in execution order (each call rewrote the file), where several have
/// them the last whose statistics agree. Throws Error where no value fits the file.
inline const FileReference& file_holder(const Trace& trace, const std::string& name, const std::vector<FileReference>& refs) {
  const auto path = trace.dir / name;
  const safetensors::Reader reader(path);
  const auto& info = reader.info(trace_format::kTensorKey);
  const std::string dtype = dtype_repr(info.dtype);
  std::vector<const FileReference*> fitting;
  for (const auto& ref : refs) {
    if (ref.slot->shape == info.shape && ref.slot->dtype == dtype) fitting.push_back(&ref);
  }
  if (fitting.empty()) {
    throw Error("tracetorch: " + path.string() + ": holds shape " + shape_for_message(info.shape) + " " + dtype + ", which none of the " +
                std::to_string(refs.size()) + " values of " + trace.json_file.string() + " that name it records");
  }
  if (fitting.size() == 1) return *fitting.front();
  const auto tensor = reader.load(trace_format::kTensorKey);
  for (auto it = fitting.rbegin(); it != fitting.rend(); ++it) {
    if (statistics_agree(tensor, *(*it)->slot)) return **it;
  }
  return *fitting.back();  // no statistics tell them apart: the last call wrote the file last
}

/// Marks each value whose file another value of the trace also names and that holds that
/// other value's tensor (TraceSlot::overwritten_by). A trace whose files are its values' own
/// (tracetorch's: `_call<N>` stems) is left as it is, unread.
inline void mark_overwritten_values(Trace& trace) {
  std::map<std::string, std::vector<FileReference>> by_file;
  for (std::size_t c = 0; c < trace.calls.size(); ++c) {
    for (auto* slots : {&trace.calls[c].inputs, &trace.calls[c].outputs}) {
      for (auto& slot : *slots) {
        if (!slot.file.empty()) by_file[std::string(trace_format::tensor_file_name(slot.file))].push_back({c, &slot});
      }
    }
  }
  for (const auto& [name, refs] : by_file) {
    if (refs.size() < 2) continue;
    const FileReference& holder = file_holder(trace, name, refs);
    for (const auto& ref : refs) {
      if (&ref != &holder) ref.slot->overwritten_by = holder.call;
    }
  }
}

}  // namespace tracetorch::detail
