#pragma once
/// \file
/// transformers' activations (activations.py): the module classes behind `ACT2FN[config.hidden_act]`,
/// each registered under its Python class name and computing its formula with the same tensor
/// operations in the same order, so that its output equals Python's bit for bit on the same input.
///
/// \code
/// torch::nn::AnyModule act = tracetorch::nn::get_activation("gelu_new");  // ACT2FN["gelu_new"]
/// register_module("act", act.ptr());                                    // a NewGELUActivation
/// act = tracetorch::nn::register_activation(*this, "act", "gelu_new");  // the same, in one line
/// torch::Tensor y = act.forward(x);
/// \endcode
///
/// The formulas are not interchangeable: `gelu_new` (NewGELUActivation), `gelu_fast`,
/// `gelu_accurate` and `gelu_pytorch_tanh` (LibTorch's tanh-approximate GELU kernel) are the same
/// function in exact arithmetic and differ by up to 2.4e-7 in float32, enough to change a printed
/// tensor's last digit.
///
/// The module shapes the classes are made from (one formula; kernel or written-out formula) are
/// detail/nn/activation_modules.hpp.

#include <torch/torch.h>

#include <cmath>
#include <numbers>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/nn/activation_modules.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn/layers.hpp"

namespace tracetorch::nn::functional {

// Each is transformers' formula, operation for operation: the tanh GELUs are one function in exact
// arithmetic, but each way of writing it rounds differently in float32.

/// GELUActivation(use_gelu_python=True): x * 0.5 * (1 + erf(x / sqrt(2))).
inline torch::Tensor gelu_python(const torch::Tensor& input) {
  return input * 0.5 * (1.0 + torch::erf(input / std::sqrt(2.0)));
}
/// NewGELUActivation, GPT-2's gelu: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
inline torch::Tensor gelu_new(const torch::Tensor& input) {
  return 0.5 * input * (1.0 + torch::tanh(std::sqrt(2.0 / std::numbers::pi) * (input + 0.044715 * torch::pow(input, 3.0))));
}
/// GELUTanh(use_gelu_tanh_python=True): gelu_new written with `x * 0.5` in front.
inline torch::Tensor gelu_python_tanh(const torch::Tensor& input) {
  return input * 0.5 * (1.0 + torch::tanh(std::sqrt(2.0 / std::numbers::pi) * (input + 0.044715 * torch::pow(input, 3.0))));
}
/// FastGELUActivation: the constant rounded to 0.7978845608 and x^3 written as x * x.
inline torch::Tensor gelu_fast(const torch::Tensor& input) {
  return 0.5 * input * (1.0 + torch::tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)));
}
/// AccurateGELUActivation (MEGA).
inline torch::Tensor gelu_accurate(const torch::Tensor& input) {
  const double precomputed_constant = std::sqrt(2 / std::numbers::pi);
  return 0.5 * input * (1 + torch::tanh(precomputed_constant * (input + 0.044715 * torch::pow(input, 3))));
}
/// QuickGELUActivation: x * sigmoid(1.702 * x).
inline torch::Tensor quick_gelu(const torch::Tensor& input) { return input * torch::sigmoid(1.702 * input); }
/// LaplaceActivation (MEGA) with upstream's forward defaults mu = 0.707107, sigma = 0.282095.
inline torch::Tensor laplace(const torch::Tensor& input) {
  const double mu = 0.707107, sigma = 0.282095;
  const torch::Tensor scaled = (input - mu).div(sigma * std::sqrt(2.0));
  return 0.5 * (1.0 + torch::erf(scaled));
}
/// ReLUSquaredActivation: relu(x)^2.
inline torch::Tensor relu2(const torch::Tensor& input) { return torch::square(torch::relu(input)); }

}  // namespace tracetorch::nn::functional

namespace tracetorch::nn {

// One Impl per Python class; the traced holder carries the Python class name.
#define TRACETORCH_DETAIL_FORMULA_ACTIVATION(Name, formula)                  \
  struct Name##Impl : detail::FormulaActivation<Name##Impl, #Name, formula> {}; \
  TRACETORCH_TRACEABLE_IMPL(Name, Name##Impl)

/// `gelu_new`: GPT-2's activation (not LibTorch's tanh GELU kernel: ~1e-7 apart in float32).
TRACETORCH_DETAIL_FORMULA_ACTIVATION(NewGELUActivation, functional::gelu_new);
/// `gelu_fast`.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(FastGELUActivation, functional::gelu_fast);
/// `gelu_accurate`.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(AccurateGELUActivation, functional::gelu_accurate);
/// `quick_gelu` (CLIP).
TRACETORCH_DETAIL_FORMULA_ACTIVATION(QuickGELUActivation, functional::quick_gelu);
/// `laplace`.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(LaplaceActivation, functional::laplace);
/// `relu2`.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(ReLUSquaredActivation, functional::relu2);
/// `linear`: returns its input.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(LinearActivation, detail::identity);
/// `mish`: LibTorch's mish kernel, as upstream calls `nn.functional.mish`.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(MishActivation, detail::mish);
/// `silu` in current transformers (a hub-kernel wrapper of `nn.functional.silu`); `swish` is
/// `tracetorch::nn::SiLU`, PyTorch's own class. Both compute LibTorch's silu kernel.
TRACETORCH_DETAIL_FORMULA_ACTIVATION(SiLUActivation, detail::silu);
#undef TRACETORCH_DETAIL_FORMULA_ACTIVATION

// The two GELU modules are one template over their options' flag: LibTorch's kernel, or
// upstream's formula written out when the flag is set.

/// `gelu`: LibTorch's exact (erf) GELU kernel; `gelu_python` is
/// `GELUActivation(GELUActivationOptions{.use_gelu_python = true})`, the formula written out.
struct GELUActivationOptions {
  bool use_gelu_python = false;
};
/// `gelu_pytorch_tanh`: LibTorch's tanh-approximate GELU kernel; `gelu_python_tanh` is
/// `GELUTanh(GELUTanhOptions{.use_gelu_tanh_python = true})`. Older transformers called the class
/// PytorchGELUTanh (an alias of GELUTanh in current versions).
struct GELUTanhOptions {
  bool use_gelu_tanh_python = false;
};
using GELUActivationImpl = detail::KernelOrFormulaActivation<"GELUActivation", GELUActivationOptions,
                                                             &GELUActivationOptions::use_gelu_python, detail::plain_gelu,
                                                             functional::gelu_python>;
using GELUTanhImpl = detail::KernelOrFormulaActivation<"GELUTanh", GELUTanhOptions, &GELUTanhOptions::use_gelu_tanh_python,
                                                       detail::tanh_gelu, functional::gelu_python_tanh>;
TRACETORCH_TRACEABLE_IMPL(GELUActivation, GELUActivationImpl);
TRACETORCH_TRACEABLE_IMPL(GELUTanh, GELUTanhImpl);

/// `gelu_10`: GELU clipped to [min, max]; upstream refuses min > max (ValueError), this a
/// tracetorch::Error.
struct ClippedGELUActivationImpl : torch::nn::Cloneable<ClippedGELUActivationImpl> {
  ClippedGELUActivationImpl(double min, double max) : min(min), max(max) {
    if (min > max) {
      throw Error("ClippedGELUActivation: min should be < max (got min: " + std::to_string(min) +
                  ", max: " + std::to_string(max) + ")");
    }
  }
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& input) { return torch::clip(torch::gelu(input), min, max); }
  void pretty_print(std::ostream& stream) const override { stream << "ClippedGELUActivation()"; }
  double min, max;
};
TRACETORCH_TRACEABLE_IMPL(ClippedGELUActivation, ClippedGELUActivationImpl);

namespace detail {

/// transformers' ACT2CLS, in its order. Left out: `prelu` is PyTorch's PReLU (use
/// tracetorch::nn::PReLU), `xielu` has bfloat16 parameters and an optional CUDA kernel.
/// A variable template of the AnyModule type: a plain table would make every file that includes
/// nn.hpp compile AnyModule for twenty module classes (a tenth of a model file's compile work,
/// by GCC's memory count), where only a file calling get_activation needs them.
template <class AnyModule>
inline constexpr ActivationEntry<AnyModule> kActivations[] = {
    // The GELU family, a line each: three of them take options.
    {"gelu", make_module<AnyModule, GELUActivation>},
    {"gelu_10", [] { return AnyModule(ClippedGELUActivation(-10, 10)); }},
    {"gelu_fast", make_module<AnyModule, FastGELUActivation>},
    {"gelu_new", make_module<AnyModule, NewGELUActivation>},
    {"gelu_python", [] { return AnyModule(GELUActivation(GELUActivationOptions{.use_gelu_python = true})); }},
    {"gelu_pytorch_tanh", make_module<AnyModule, GELUTanh>},
    {"gelu_python_tanh", [] { return AnyModule(GELUTanh(GELUTanhOptions{.use_gelu_tanh_python = true})); }},
    {"gelu_accurate", make_module<AnyModule, AccurateGELUActivation>},
    // The rest, all built with their default options.
    {"laplace", make_module<AnyModule, LaplaceActivation>}, {"leaky_relu", make_module<AnyModule, LeakyReLU>},
    {"linear", make_module<AnyModule, LinearActivation>},
    {"mish", make_module<AnyModule, MishActivation>},
    {"quick_gelu", make_module<AnyModule, QuickGELUActivation>},
    {"relu", make_module<AnyModule, ReLU>}, {"relu2", make_module<AnyModule, ReLUSquaredActivation>},
    {"relu6", make_module<AnyModule, ReLU6>},
    {"sigmoid", make_module<AnyModule, Sigmoid>}, {"silu", make_module<AnyModule, SiLUActivation>},
    {"swish", make_module<AnyModule, SiLU>},
    {"tanh", make_module<AnyModule, Tanh>},
};

}  // namespace detail

/// The names get_activation knows, in transformers' ACT2CLS order. (Both functions are templates
/// only so that the module table is compiled where they are called: leave AnyModule as it is.)
template <class AnyModule = torch::nn::AnyModule>
std::vector<std::string_view> activation_names() {
  std::vector<std::string_view> names;
  for (const auto& entry : detail::kActivations<AnyModule>) names.push_back(entry.name);
  return names;
}

/// transformers' `ACT2FN[name]` (`get_activation(name)`): a new module of the class upstream
/// maps `name` to, traced under that class's Python name. Register it with
/// `register_module("act", act.ptr())` and call `act.forward(x)`. An unknown name is a
/// tracetorch::Error listing the known ones (upstream raises KeyError).
template <class AnyModule = torch::nn::AnyModule>
AnyModule get_activation(std::string_view name) {
  for (const auto& entry : detail::kActivations<AnyModule>) {
    if (entry.name == name) return entry.make();
  }
  std::string known;
  for (const auto& entry : detail::kActivations<AnyModule>) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  throw Error("tracetorch::nn::get_activation: function \"" + std::string(name) + "\" not found in ACT2FN mapping [" +
              known + "]");
}

/// get_activation and register_module in one line: `act = tracetorch::nn::register_activation(*this,
/// "act", config.activation_function);` registers ACT2FN[name] under `name` and returns it.
template <class AnyModule = torch::nn::AnyModule>
AnyModule register_activation(torch::nn::Module& parent, const std::string& name, std::string_view activation) {
  AnyModule act = get_activation<AnyModule>(activation);
  parent.register_module(name, act.ptr());
  return act;
}

}  // namespace tracetorch::nn
