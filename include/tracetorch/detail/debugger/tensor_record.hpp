#pragma once
/// \file
/// The JSON record of one tensor as transformers' debugger writes it: shape, dtype, its value
/// (printed lines or a file) and statistics; a tensor recorded again unchanged is encoded once.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/detail/debugger/call_json.hpp"
#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/debugger/repeated_tensors.hpp"
#include "tracetorch/detail/debugger/tensor_stats.hpp"
#include "tracetorch/detail/debugger/trace_files.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/repr/tensor_repr.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"

namespace tracetorch::detail {

/// The TensorEncoder of a debugger session. Between begin() and end() it remembers, in the
/// forward's arena, the tensors it has encoded (with reuse_repeated_tensors).
class TensorRecorder final : public TensorEncoder {
 public:
  /// `use_repr`, `reuse_repeated`: DebuggerOptions' use_repr and reuse_repeated_tensors; tensor
  /// files go to `files`, what is remembered to `memory`.
  TensorRecorder(bool use_repr, bool reuse_repeated, TraceFiles& files, ForwardArena& memory)
      : use_repr_(use_repr), reuse_repeated_(reuse_repeated), files_(files), memory_(memory) {}

  void begin() { encoded_.emplace(&memory_); }
  void end() noexcept { encoded_.reset(); }

  /// The staged files from the `count`th on were removed: their tensors are encoded anew.
  void forget_files_from(std::size_t count) {
    if (!use_repr_ && encoded_) encoded_->forget_files_from(count);
  }

  boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix, boost::json::storage_ptr storage) override {
    std::optional<TensorFingerprint> identity;
    if (reuse_repeated_ && (identity = fingerprint(tensor))) {
      if (const EncodedTensor* seen = encoded_->find(*identity)) return record_again(*seen, tensor, prefix, storage);
    }
    std::string printed;
    boost::json::object record = record_anew(tensor, prefix, storage, printed);
    if (identity) remember(std::move(*identity), record, printed);
    return record;
  }

 private:
  /// python_print_lines, but each line straight into the JSON array.
  static boost::json::array print_lines(std::string_view printed, boost::json::storage_ptr storage) {
    boost::json::array lines(std::move(storage));
    for_each_line(printed, [&](std::string_view line) { lines.emplace_back(line); });
    return lines;
  }

  /// The record of a tensor encoded before as `seen`: a copy, with its own file.
  boost::json::object record_again(const EncodedTensor& seen, const torch::Tensor& tensor, const std::string& prefix,
                                   boost::json::storage_ptr storage) {
    boost::json::object record(seen.record, storage);
    if (use_repr_) {
      record[trace_format::kValue] = print_lines(seen.printed, storage);
    } else {
      set_text(record[trace_format::kValue], files_.link(tensor, prefix, seen.file_index));
    }
    return record;
  }

  /// The record of a tensor not seen before; with use_repr, its print goes to `printed`.
  boost::json::object record_anew(const torch::Tensor& tensor, const std::string& prefix,
                                  boost::json::storage_ptr storage, std::string& printed) {
    boost::json::object record(storage);
    set_text(record[trace_format::kShape], shape_repr(tensor.sizes()));
    set_text(record[trace_format::kDtype], dtype_repr(tensor.scalar_type()));
    if (use_repr_) {
      printed = tensor_repr(tensor);
      record[trace_format::kValue] = print_lines(printed, storage);
    } else {
      set_text(record[trace_format::kValue], files_.write(tensor, prefix));
    }
    const auto type = tensor.scalar_type();
    if (type == torch::kFloat16 || type == torch::kFloat32 || type == torch::kBFloat16) add_statistics(record, tensor);
    return record;
  }

  void remember(TensorFingerprint identity, const boost::json::object& record, std::string_view printed) {
    // Kept with the print as one string, not its lines: one copy instead of one per line.
    boost::json::object kept(memory_.json_storage());
    kept.reserve(record.size());
    for (const auto& entry : record) {
      if (use_repr_ && entry.key() == trace_format::kValue) {
        kept.emplace(entry.key(), nullptr);
      } else {
        kept.emplace(entry.key(), entry.value());
      }
    }
    const std::size_t file_index = use_repr_ ? 0 : files_.count() - 1;
    encoded_->add(std::move(identity), std::move(kept), printed, file_index);
  }

  bool use_repr_;
  bool reuse_repeated_;
  TraceFiles& files_;
  ForwardArena& memory_;
  std::optional<EncodedTensors> encoded_;  // between begin() and end()
};

}  // namespace tracetorch::detail
