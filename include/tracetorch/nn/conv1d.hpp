#pragma once
/// \file
/// transformers' `Conv1D` (pytorch_utils.py), the projection layer of GPT-2 and OpenAI GPT:
/// a linear layer whose weight is stored transposed, [in_features, out_features], computed as
/// `addmm(bias, x.view(-1, in), weight)`. It is not a convolution.
///
/// Mind the name: `tracetorch::nn::Conv1D` (capital D) is this layer; `tracetorch::nn::Conv1d`
/// (lower-case d) is LibTorch's 1-D convolution, PyTorch's `nn.Conv1d`. A GPT-2 checkpoint's
/// `c_attn.weight` is [hidden, 3 * hidden] and loads into Conv1D(3 * hidden, hidden) as it is; into
/// a `Linear` it would need a transpose first.
///
/// \code
/// tracetorch::nn::Conv1D c_attn{nullptr};
/// c_attn = register_module("c_attn", tracetorch::nn::Conv1D(3 * hidden, hidden));  // nf (out), nx (in)
/// \endcode

#include <torch/torch.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch::nn {

struct Conv1DImpl : torch::nn::Cloneable<Conv1DImpl> {
  /// Python's argument order: `Conv1D(nf, nx)`, nf output features, nx input features.
  Conv1DImpl(std::int64_t nf, std::int64_t nx) : nf(nf), nx(nx) { reset(); }

  /// As upstream's __init__: weight [nx, nf] drawn from normal(0, 0.02), bias zeros; with the
  /// same seed, the same values as Python's (one draw from the default generator).
  void reset() override {
    weight = register_parameter("weight", torch::empty({nx, nf}));
    bias = register_parameter("bias", torch::zeros({nf}));
    torch::nn::init::normal_(weight, 0.0, 0.02);
  }

  /// [..., nx] -> [..., nf].
  torch::Tensor forward(const torch::Tensor& x) {
    if (x.dim() == 0) throw Error("Conv1D: the input must have at least one dimension (the features)");
    std::vector<std::int64_t> size_out = x.sizes().vec();
    size_out.back() = nf;
    return torch::addmm(bias, x.view({-1, x.size(-1)}), weight).view(size_out);
  }

  /// Upstream's repr: `Conv1D(nf=2304, nx=768)`.
  void pretty_print(std::ostream& stream) const override { stream << "Conv1D(nf=" << nf << ", nx=" << nx << ")"; }

  std::int64_t nf, nx;
  torch::Tensor weight, bias;
};
TRACETORCH_TRACEABLE_IMPL(Conv1D, Conv1DImpl);

}  // namespace tracetorch::nn
