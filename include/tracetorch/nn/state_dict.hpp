#pragma once
/// \file
/// PyTorch's state dict for LibTorch modules, with non-persistent buffers.
///
/// PyTorch's `register_buffer(name, tensor, persistent=False)` makes a buffer that moves with the
/// module (`to()`, `named_buffers()`) but is left out of `state_dict()`, so checkpoints do not hold
/// it: transformers' rotary `inv_freq`, GPT-2's causal `bias` mask in older versions. LibTorch
/// has no such flag. A module that needs one derives from `tracetorch::nn::Module` (a
/// `torch::nn::Module`) and registers the buffer with `{.persistent = false}`; `state_dict()` and
/// `load_state_dict()` below, and the library's save/load test (testing.hpp), skip it.
///
/// \code
/// struct RotaryImpl : tracetorch::nn::Module {
///   RotaryImpl() { inv_freq = register_buffer("inv_freq", torch::ones({4}), {.persistent = false}); }
///   torch::Tensor inv_freq;
/// };
/// tracetorch::nn::state_dict(*model);   // parameters and persistent buffers, PyTorch's order
/// \endcode
///
/// The walk and the strict load's checks are detail/nn/state_dict.hpp.

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/nn/state_dict.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::nn {

/// The options of `Module::register_buffer`, PyTorch's keyword arguments.
struct BufferOptions {
  /// False: kept out of `state_dict()` (PyTorch's `persistent=False`).
  bool persistent = true;
};

/// `torch::nn::Module` with PyTorch's `register_buffer(name, tensor, persistent=...)`. A virtual
/// base, as in LibTorch's `Cloneable`, so `struct X : torch::nn::Cloneable<X>, tracetorch::nn::Module`
/// also works.
class Module : public virtual torch::nn::Module {
 public:
  using torch::nn::Module::register_buffer;

  /// Registers a buffer as LibTorch does (a name registered twice is LibTorch's error);
  /// `{.persistent = false}` keeps it out of `state_dict()`.
  torch::Tensor& register_buffer(std::string name, torch::Tensor tensor, BufferOptions options) {
    const std::string key = name;
    torch::Tensor& registered = torch::nn::Module::register_buffer(std::move(name), std::move(tensor));
    if (!options.persistent) non_persistent_buffers_.insert(key);
    return registered;
  }

  /// False for a buffer registered with `{.persistent = false}`; true for any other name.
  bool is_persistent_buffer(const std::string& name) const { return non_persistent_buffers_.count(name) == 0; }

 private:
  std::set<std::string> non_persistent_buffers_;
};

/// True unless `name` is a buffer of `module` registered with `{.persistent = false}`.
inline bool is_persistent_buffer(const torch::nn::Module& module, const std::string& name) {
  const auto* with_flags = dynamic_cast<const Module*>(&module);
  return with_flags == nullptr || with_flags->is_persistent_buffer(name);
}

/// PyTorch's `module.state_dict()`: every defined parameter and persistent buffer by its dotted
/// name, in PyTorch's order (a module's own parameters, then its own buffers, then each child's,
/// depth first). The tensors are the module's own, not copies (`detach()` them to save).
inline std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  detail::collect_state_dict(module, "", is_persistent_buffer, out);
  return out;
}

/// PyTorch's `module.load_state_dict(tensors, strict=True)`: copies each tensor into the
/// parameter or persistent buffer of that name. A name the module lacks, one it has that `tensors`
/// lacks, or a shape that differs is a tracetorch::Error naming the tensor and `source` (a file
/// name, for the message); nothing is copied then. Non-persistent buffers are neither expected
/// nor accepted, as in PyTorch.
inline void load_state_dict(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& tensors,
                            const std::string& source = "state dict") {
  const auto targets = state_dict(module);
  detail::check_state_dict_matches(targets, tensors, source);
  detail::copy_state_dict(targets, tensors);
}

}  // namespace tracetorch::nn
