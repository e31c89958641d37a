#pragma once
/// \file
/// The non-finite sentinel: names the first module call, in the order calls end, whose outputs
/// hold NaN or Inf while its inputs were finite, with which output and how many elements of which
/// kind. It writes no trace. The same sentinel is an option of the debugger
/// (`DebuggerOptions::find_nonfinite`) and of a call (`OutputOptions::find_nonfinite`).
///
/// \code
/// auto sentinel = tracetorch::find_nonfinite(model);
/// model->forward(input_ids);
/// if (auto found = sentinel.first()) std::cerr << found->message() << '\n';
/// // first non-finite: LlamaModel.layers.1.mlp.down_proj (call 1) outputs: 3 of 64 elements NaN
/// \endcode

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tracetorch/nonfinite/finding.hpp"
#include "tracetorch/detail/nonfinite/watch.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch {

/// The scope of `find_nonfinite`: while it lives, each forward of the root module is watched
/// (one forward at a time: a forward another thread runs meanwhile is not), until something is
/// found; clear() looks again. The model is left as it was when the scope ends.
///
/// \code
/// auto sentinel = tracetorch::find_nonfinite(model);
/// model->forward(x);
/// if (const auto found = sentinel.first(); found && !found->in_root_inputs) return found->module_path;
/// \endcode
class [[nodiscard]] NonFiniteScope {
 public:
  explicit NonFiniteScope(std::unique_ptr<detail::NonFiniteWatch> watch) noexcept : watch_(std::move(watch)) {}

  /// The first finding since the scope began or clear() was last called; empty if none.
  std::optional<NonFinite> first() const { return watch_ ? watch_->first() : std::nullopt; }
  /// Forget the finding: the next forward is watched again.
  void clear() {
    if (watch_) watch_->clear();
  }
  /// Modules under the root that are not TRACEABLE: their calls are not watched (a NaN they
  /// make is named at the traced module that called them).
  const std::vector<std::string>& untraced_modules() const noexcept {
    static const std::vector<std::string> none;
    return watch_ ? watch_->untraced() : none;
  }

 private:
  std::unique_ptr<detail::NonFiniteWatch> watch_;
};

/// Watches every forward of `model` (a TRACEABLE root) for NaN and Inf while the returned scope
/// lives; see NonFinite for what a finding holds. With TRACETORCH_DISABLE it finds nothing.
///
/// \code
/// auto sentinel = tracetorch::find_nonfinite(model);
/// model({.input_ids = ids});
/// if (auto found = sentinel.first()) { std::cerr << found->message() << '\n'; return 3; }
/// \endcode
template <class ModuleType>
NonFiniteScope find_nonfinite(const std::shared_ptr<ModuleType>& model) {
#ifdef TRACETORCH_DISABLE
  (void)model;
  return NonFiniteScope(nullptr);
#else
  static_assert(std::is_base_of_v<detail::TracedModuleBase, ModuleType>,
                "tracetorch::find_nonfinite: the root module must be declared with TRACEABLE(Name)");
  if (!model) throw Error("tracetorch: find_nonfinite: the model is empty (a null holder)");
  return NonFiniteScope(std::make_unique<detail::NonFiniteWatch>(*model, std::string(model->traced_name())));
#endif
}

/// The same, for a TRACEABLE holder (`Tiny model; tracetorch::find_nonfinite(model)`).
template <class ModuleType>
NonFiniteScope find_nonfinite(torch::nn::ModuleHolder<ModuleType>& model) {
  return find_nonfinite(model.ptr());
}

}  // namespace tracetorch
