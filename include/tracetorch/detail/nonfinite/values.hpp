#pragma once
/// \file
/// The non-finite sentinel's view of a call's values: which tensors can hold NaN or Inf, where
/// each one sits in the call (named as tracetorch-diff names it), the one reduction that says
/// whether a tensor is finite, and the counting done only for the value that is not.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/nonfinite/finding.hpp"
#include "tracetorch/detail/trace_format/format.hpp"

namespace tracetorch::detail {

/// Floating and complex tensors with elements: the only ones that can hold NaN or Inf.
inline bool may_be_nonfinite(const torch::Tensor& tensor) {
  return tensor.defined() && tensor.layout() == torch::kStrided && !tensor.is_meta() &&
         (tensor.is_floating_point() || tensor.is_complex()) && tensor.numel() > 0;
}

/// The sentinel's one reduction per value: the sum, one pass that makes no tensor of the
/// value's size (isfinite would: a byte per element, 67 MB for one attention map at 4 x 2048).
/// A finite sum means every element is finite, since a NaN or an Inf makes the sum NaN or Inf;
/// only a sum that is not finite (non-finite elements, or finite ones that overflowed it) is
/// checked element by element.
inline bool all_finite(const torch::Tensor& tensor) {
  const torch::NoGradGuard no_grad;
  if (torch::isfinite(tensor.sum()).item<bool>()) return true;
  return torch::isfinite(tensor).all().item<bool>();
}

/// Counts NaN, +Inf and -Inf into `found`; a complex tensor part by part.
inline void count_nonfinite(const torch::Tensor& tensor, NonFinite& found) {
  const torch::NoGradGuard no_grad;
  const torch::Tensor parts = tensor.is_complex() ? torch::view_as_real(tensor.resolve_conj()) : tensor;
  found.nan = torch::isnan(parts).sum().item<std::int64_t>();
  found.positive_inf = torch::isposinf(parts).sum().item<std::int64_t>();
  found.negative_inf = torch::isneginf(parts).sum().item<std::int64_t>();
  found.elements = parts.numel();
}

/// Walks a call's arguments or result and hands `sink(location, tensor)` each tensor that
/// may_be_nonfinite, located as the trace reader locates values: `inputs.args.0`,
/// `inputs.kwargs.mask.1`, `outputs`, `outputs.last_hidden_state`.
template <class Sink>
class TensorLocations final : public ArgumentVisitor {
 public:
  /// `base`: the location of a result (`outputs`); arguments set their own as they come.
  TensorLocations(std::string base, Sink& sink) : location_(std::move(base)), sink_(sink) {}

  void positional(std::size_t index) override { at_argument(trace_format::kArgs, std::to_string(index)); }
  void keyword(std::string_view name) override { at_argument(trace_format::kKwargs, name); }
  void tensor(const torch::Tensor& value) override {
    if (may_be_nonfinite(value)) sink_(location_, value);
  }
  void begin_sequence() override { open_.push_back(location_.size()); }
  void begin_mapping() override { open_.push_back(location_.size()); }
  void element(std::size_t index) override { at_key(std::to_string(index)); }
  void entry(std::string_view key) override { at_key(key); }
  void end() override {
    location_.resize(open_.back());
    open_.pop_back();
  }
  void none() override {}
  void boolean(bool) override {}
  void integer(std::int64_t) override {}
  void floating(double) override {}
  void string(std::string_view) override {}
  void dtype(c10::ScalarType) override {}
  void repr(std::string_view) override {}

 private:
  void at_argument(std::string_view kind, std::string_view key) {
    location_.assign(trace_format::kInputs);
    location_ += trace_format::kLocationSeparator;
    location_ += kind;
    location_ += trace_format::kLocationSeparator;
    location_ += key;
  }
  void at_key(std::string_view key) {
    location_.resize(open_.back());
    location_ += trace_format::kLocationSeparator;
    location_ += key;
  }

  std::string location_;
  std::vector<std::size_t> open_;  // the location's length at each open sequence or mapping
  Sink& sink_;
};

}  // namespace tracetorch::detail
