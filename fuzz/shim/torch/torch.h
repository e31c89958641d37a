#pragma once
// Stands in for <torch/torch.h> in the fuzz build only. Debian's clang 14 cannot compile the
// full LibTorch 1.13 header in C++20 mode against libstdc++ 12 (std::vector<c10::IValue> of
// an incomplete type in ATen/core/ivalue_inl.h), so the fuzzers get the part of it that
// include/tracetorch/safetensors.hpp names: ATen's Tensor and c10's types compile; the one
// factory function it calls is declared here and defined by the fuzz target (the header
// parser under test never calls it).

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/core/TensorOptions.h>

namespace torch {
using at::Tensor;
using c10::TensorOptions;
using c10::kCPU;
at::Tensor empty(at::IntArrayRef size, at::TensorOptions options);
}  // namespace torch
