#pragma once
/// \file
/// tracetorch: transformers' model-porting tools for LibTorch. One include:
/// `TRACEABLE(Name)` on each module class, `tracetorch::nn::` traced layers, and
/// `tracetorch::model_addition_debugger` to trace a forward pass.

#include "tracetorch/cache.hpp"
#include "tracetorch/capture.hpp"
#include "tracetorch/checkpoint.hpp"
#include "tracetorch/config.hpp"
#include "tracetorch/config_file.hpp"
#include "tracetorch/customization.hpp"
#include "tracetorch/debugger.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/keywords.hpp"
#include "tracetorch/kwargs.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn.hpp"
#include "tracetorch/nonfinite.hpp"
#include "tracetorch/patch_mapping.hpp"
#include "tracetorch/python_repr.hpp"
#include "tracetorch/safetensors.hpp"
