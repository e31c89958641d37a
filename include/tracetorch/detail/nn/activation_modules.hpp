#pragma once
/// \file
/// The shapes the activation classes of tracetorch/nn/activations.hpp are made from: a
/// parameterless module over one formula, one that picks LibTorch's kernel or upstream's written-out
/// formula, the kernels themselves, and an entry of ACT2CLS.

#include <torch/torch.h>

#include <ostream>
#include <string_view>

#include "tracetorch/detail/module/traced.hpp"  // FixedString

namespace tracetorch::nn::detail {

/// A parameterless activation module: `forward` applies `Formula`, `pretty_print` shows the
/// Python repr `Name()` (transformers' activations have no extra_repr).
template <class Derived, tracetorch::detail::FixedString Name, torch::Tensor (*Formula)(const torch::Tensor&)>
struct FormulaActivation : torch::nn::Cloneable<Derived> {
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& input) { return Formula(input); }
  void pretty_print(std::ostream& stream) const override { stream << Name.view() << "()"; }
};

/// LibTorch's kernel, or upstream's formula written out when the Python flag (`use_gelu_python`,
/// `use_gelu_tanh_python`: the member of `Options` that `UseWrittenOut` names) asks for it.
/// `Options` is a type parameter so that lookup by argument finds TRACEABLE's marker in its namespace.
template <tracetorch::detail::FixedString Name, class Options, bool Options::*UseWrittenOut,
          torch::Tensor (*Kernel)(const torch::Tensor&), torch::Tensor (*WrittenOut)(const torch::Tensor&)>
struct KernelOrFormulaActivation
    : torch::nn::Cloneable<KernelOrFormulaActivation<Name, Options, UseWrittenOut, Kernel, WrittenOut>> {
  explicit KernelOrFormulaActivation(Options options = {}) : written_out(options.*UseWrittenOut) {}
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& input) { return written_out ? WrittenOut(input) : Kernel(input); }
  void pretty_print(std::ostream& stream) const override { stream << Name.view() << "()"; }
  bool written_out;
};

inline torch::Tensor identity(const torch::Tensor& input) { return input; }
inline torch::Tensor plain_gelu(const torch::Tensor& input) { return torch::gelu(input); }
inline torch::Tensor tanh_gelu(const torch::Tensor& input) { return torch::gelu(input, "tanh"); }
inline torch::Tensor silu(const torch::Tensor& input) { return torch::silu(input); }
inline torch::Tensor mish(const torch::Tensor& input) { return torch::mish(input); }

/// One name of transformers' ACT2CLS and how to make its module (AnyModule: torch::nn::AnyModule,
/// a template parameter only so that the table is compiled where it is used; see activations.hpp).
template <class AnyModule>
struct ActivationEntry {
  std::string_view name;
  AnyModule (*make)();
};

/// An entry's `make` for a module built with its default options.
template <class AnyModule, class Module>
AnyModule make_module() {
  return AnyModule(Module());
}

}  // namespace tracetorch::nn::detail
