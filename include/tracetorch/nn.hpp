#pragma once
/// \file
/// Traced layers: LibTorch's (nn/layers.hpp) and transformers' building blocks (activations,
/// GPT-2's Conv1D), each registered under its Python class name, and PyTorch's state dict with
/// non-persistent buffers (nn/state_dict.hpp).
///
/// \code
/// tracetorch::nn::Linear gate_proj{nullptr};
/// gate_proj = register_module("gate_proj", tracetorch::nn::Linear(torch::nn::LinearOptions(64, 172).bias(false)));
/// \endcode

#include "tracetorch/nn/activations.hpp"
#include "tracetorch/nn/conv1d.hpp"
#include "tracetorch/nn/layers.hpp"
#include "tracetorch/nn/state_dict.hpp"
