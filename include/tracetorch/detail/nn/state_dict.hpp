#pragma once
/// \file
/// PyTorch's state dict over LibTorch modules, the walk and the strict load, documented in
/// tracetorch/nn/state_dict.hpp. Which buffers are persistent is the public nn::Module's to say:
/// the walk asks the predicate it is given.

#include <torch/torch.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"

namespace tracetorch::nn::detail {

/// Parameters and persistent buffers by dotted name.
using NamedTensorList = std::vector<std::pair<std::string, torch::Tensor>>;

/// True unless `name` is a non-persistent buffer of the module (nn::is_persistent_buffer).
using IsPersistentBuffer = bool (*)(const torch::nn::Module& module, const std::string& name);

/// Appends `module`'s defined parameters, then its persistent buffers, then each child's, depth
/// first (PyTorch's order), each named `prefix` + its dotted path.
inline void collect_state_dict(const torch::nn::Module& module, const std::string& prefix, IsPersistentBuffer is_persistent,
                               NamedTensorList& out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) out.emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined() && is_persistent(module, item.key())) out.emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& child : module.named_children()) {
    collect_state_dict(*child.value(), prefix + child.key() + ".", is_persistent, out);
  }
}

/// Refuses `tensors` unless they hold exactly the targets' names, each with its target's shape.
inline void check_state_dict_matches(const NamedTensorList& targets, const std::map<std::string, torch::Tensor>& tensors,
                                     const std::string& source) {
  std::set<std::string> expected;
  for (const auto& [name, target] : targets) {
    expected.insert(name);
    const auto found = tensors.find(name);
    if (found == tensors.end()) throw Error(source + ": missing tensor \"" + name + "\"");
    if (found->second.sizes() != target.sizes()) {
      std::ostringstream why;
      why << source << ": tensor \"" << name << "\" has shape " << found->second.sizes() << " but the model expects "
          << target.sizes();
      throw Error(why.str());
    }
  }
  for (const auto& [name, tensor] : tensors) {
    if (expected.count(name) == 0) {
      throw Error(source + ": unexpected tensor \"" + name + "\" (the model has no such parameter or persistent buffer)");
    }
  }
}

/// Copies each of `tensors` into the target of its name, without recording gradients.
inline void copy_state_dict(const NamedTensorList& targets, const std::map<std::string, torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) {
    torch::Tensor destination = target;
    destination.copy_(tensors.at(name));
  }
}

}  // namespace tracetorch::nn::detail
