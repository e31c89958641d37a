#pragma once
/// \file
/// Traced forms of the LibTorch layers models are built from. Each is the LibTorch module with
/// the same options and behaviour, registered under PyTorch's class name, so a trace shows
/// `LlamaModel.layers.0.mlp.gate_proj` exactly where transformers does.
///
/// `Conv1d` here is LibTorch's (PyTorch's `nn.Conv1d`) convolution; transformers' GPT-2 layer
/// `Conv1D` (a linear layer with its weight stored [in, out]) is `tracetorch::nn::Conv1D`, in
/// nn/conv1d.hpp.

#include <torch/torch.h>

#include "tracetorch/module.hpp"

namespace tracetorch::nn {

#ifdef TRACETORCH_DISABLE
// Compiled out: the LibTorch modules themselves.
using Linear = torch::nn::Linear;
using Embedding = torch::nn::Embedding;
using LayerNorm = torch::nn::LayerNorm;
using Dropout = torch::nn::Dropout;
using SiLU = torch::nn::SiLU;
using GELU = torch::nn::GELU;
using ReLU = torch::nn::ReLU;
using Tanh = torch::nn::Tanh;
using Softmax = torch::nn::Softmax;
using Sigmoid = torch::nn::Sigmoid;
using LeakyReLU = torch::nn::LeakyReLU;
using ReLU6 = torch::nn::ReLU6;
using PReLU = torch::nn::PReLU;
using Conv1d = torch::nn::Conv1d;
using Conv2d = torch::nn::Conv2d;
using Sequential = torch::nn::Sequential;
#else
TRACETORCH_TRACEABLE_IMPL(Linear, torch::nn::LinearImpl);
TRACETORCH_TRACEABLE_IMPL(Embedding, torch::nn::EmbeddingImpl);
TRACETORCH_TRACEABLE_IMPL(LayerNorm, torch::nn::LayerNormImpl);
TRACETORCH_TRACEABLE_IMPL(Dropout, torch::nn::DropoutImpl);
TRACETORCH_TRACEABLE_IMPL(SiLU, torch::nn::SiLUImpl);
TRACETORCH_TRACEABLE_IMPL(GELU, torch::nn::GELUImpl);
TRACETORCH_TRACEABLE_IMPL(ReLU, torch::nn::ReLUImpl);
TRACETORCH_TRACEABLE_IMPL(Tanh, torch::nn::TanhImpl);
TRACETORCH_TRACEABLE_IMPL(Softmax, torch::nn::SoftmaxImpl);
TRACETORCH_TRACEABLE_IMPL(Sigmoid, torch::nn::SigmoidImpl);
TRACETORCH_TRACEABLE_IMPL(LeakyReLU, torch::nn::LeakyReLUImpl);
TRACETORCH_TRACEABLE_IMPL(ReLU6, torch::nn::ReLU6Impl);
TRACETORCH_TRACEABLE_IMPL(PReLU, torch::nn::PReLUImpl);
TRACETORCH_TRACEABLE_IMPL(Conv1d, torch::nn::Conv1dImpl);
TRACETORCH_TRACEABLE_IMPL(Conv2d, torch::nn::Conv2dImpl);
/// A traced Sequential: one node for the Sequential call, one per element that is itself traced.
TRACETORCH_TRACEABLE_IMPL(Sequential, torch::nn::SequentialImpl);
#endif  // TRACETORCH_DISABLE
/// ModuleList has no forward of its own: its elements are traced when called through their
/// holder type, e.g. `layers[i]->as<DecoderLayer>()->forward(x)` (see the README).
using ModuleList = torch::nn::ModuleList;

}  // namespace tracetorch::nn
