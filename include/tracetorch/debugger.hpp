#pragma once
/// \file
/// The model addition debugger: the C++ form of transformers' `model_addition_debugger_context`.
/// While a scope lives, each forward of the root module is recorded as a nested call tree and
/// written, when the root returns, as `<Root>_debug_tree_SUMMARY.json` and `_FULL_TENSORS.json`.
///
/// \code
/// {
///   auto guard = tracetorch::model_addition_debugger(model, {.debug_path = "dbg", .do_prune_layers = false});
///   auto out = model->forward(input_ids);  // writes dbg/LlamaModel_debug_tree_{SUMMARY,FULL_TENSORS}.json
/// }
/// \endcode

#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/module/debug_io.hpp"
#include "tracetorch/detail/debugger/session.hpp"
#include "tracetorch/detail/debugger/trace_files.hpp"
#include "tracetorch/detail/nonfinite/watch.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch {

/// Options of `model_addition_debugger`, named and defaulted as in transformers.
///
/// \code
/// tracetorch::DebuggerOptions options{.debug_path = "dbg", .do_prune_layers = false, .use_repr = false};
/// \endcode
/// See DebuggerOptions::repeated_call_files.
enum class RepeatedCallFiles { numbered, shared };

struct DebuggerOptions {
  /// Where the JSON files (and, without use_repr, the .safetensors files) go; created if
  /// missing. Empty: the current directory. Each trace replaces the previous one whole, in one
  /// step, even if the process is killed (docs/reliability.md); in the process's working
  /// directory (the default), a mount point or on a filesystem without RENAME_EXCHANGE, file by
  /// file, each file whole.
  std::filesystem::path debug_path;
  /// Keep only the first and last of each run of numbered layer blocks (`layers.0` ... `layers.N`).
  bool do_prune_layers = true;
  /// true: tensor values as Python's print lines in _FULL_TENSORS.json; false: one
  /// `<module_path>_<inputs|outputs>_....safetensors` file per tensor, key "data".
  bool use_repr = true;
  /// This process's rank in a multi-process run; only rank 0 records. Default: $RANK, else 0.
  std::optional<int> rank;
  /// A tensor recorded again, unchanged, in the same forward (one module's output passed on to
  /// the next: half of a Llama's records) is encoded once: its later records are copies of the
  /// first, and with use_repr=false its later files are hard links to the first one (copies
  /// where the filesystem has no hard links). The trace reads the same either way; false
  /// computes every record and writes every file on its own.
  bool reuse_repeated_tensors = true;
  /// The files a trace replaces (with use_repr=false its tensor files, with use_repr=true its
  /// two JSON files) are kept, in a hidden directory of debug_path
  /// (`.tracetorch-spares-<pid>-<16 hex>`, where the next trace is staged) removed when the
  /// process exits, and the next trace into debug_path from this process writes over them
  /// instead of into new files: much faster on a VM that hands freed memory back to its host
  /// (docs/performance.md). Costs disk: up to a second copy of the trace while the process runs.
  /// A spare that another process has open or mapped, or that has another link, is never
  /// written over. false: the replaced files are deleted.
  bool reuse_previous_files = true;
  /// Also watch for NaN and Inf (the non-finite sentinel, <tracetorch/nonfinite.hpp>): the first
  /// module call whose outputs held NaN or Inf while its inputs were finite is kept, and read by
  /// DebuggerScope::first_nonfinite(). One reduction per output tensor per call; the trace is
  /// written the same either way.
  bool find_nonfinite = false;
  /// How a module called more than once in one forward names its later calls' tensor files
  /// (use_repr=false). `numbered` (the default): `<path>_call<N>_...`, so every call's values are
  /// kept and can be compared. `shared`: transformers' naming, one file per module path whose
  /// last call wins, for JSON byte-identical with a Python trace of such a model (its earlier
  /// calls then read as "overwritten", as the Python trace's do).
  RepeatedCallFiles repeated_call_files = RepeatedCallFiles::numbered;
};

class DebuggerScope;
template <class ModuleType>
DebuggerScope model_addition_debugger(const std::shared_ptr<ModuleType>& model, DebuggerOptions options = {});

namespace detail {

/// Only model_addition_debugger makes scopes.
class ScopeAccess {
  template <class ModuleType>
  friend DebuggerScope tracetorch::model_addition_debugger(const std::shared_ptr<ModuleType>&, DebuggerOptions);
  friend DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options);
  ScopeAccess() = default;
};

DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options);

}  // namespace detail

/// The scope of `model_addition_debugger`: while it lives, each forward of the root module is
/// traced; the model is left as it was when it ends. A forward another thread is recording when
/// the scope ends runs to its end, and its trace is written, before the destructor returns.
///
/// \code
/// auto scope = tracetorch::model_addition_debugger(model, {.debug_path = "dbg"});
/// model->forward(input_ids);
/// for (const auto& path : scope.modules_not_called()) std::cerr << "not traced: " << path << '\n';
/// \endcode
class [[nodiscard]] DebuggerScope {
 public:
  /// Made by model_addition_debugger.
  DebuggerScope(detail::ScopeAccess, std::unique_ptr<detail::DebuggerSession> session,
                std::unique_ptr<detail::AttachmentSet> attachments,
                std::unique_ptr<detail::NonFiniteWatch> nonfinite = nullptr) noexcept
      : session_(std::move(session)), attachments_(std::move(attachments)), nonfinite_(std::move(nonfinite)) {}
  DebuggerScope(DebuggerScope&&) noexcept = default;
  DebuggerScope& operator=(DebuggerScope&&) = delete;  // would free a session still attached
  ~DebuggerScope() {
    if (session_) session_->close();
    attachments_.reset();
    nonfinite_.reset();
  }

  /// Modules under the root that are not TRACEABLE (plain LibTorch modules): their calls are
  /// not in the trace. Empty on a rank other than 0.
  const std::vector<std::string>& untraced_modules() const noexcept { return attachments_->untraced(); }
  /// Where the next forward writes _FULL_TENSORS.json / _SUMMARY.json (empty on other ranks).
  std::filesystem::path full_tensors_path() const { return session_ ? session_->full_tensors_path() : std::filesystem::path(); }
  std::filesystem::path summary_path() const { return session_ ? session_->summary_path() : std::filesystem::path(); }
  /// Traced modules under the root that did not run through their traced forward in the last
  /// traced forward: not called, or called through their Impl (then missing from the trace;
  /// the first such forward also warns on stderr).
  std::vector<std::string> modules_not_called() const {
    return session_ ? session_->modules_not_called() : std::vector<std::string>();
  }
  /// With DebuggerOptions::find_nonfinite: the first module call, since the scope began, whose
  /// outputs held NaN or Inf while its inputs were finite (or the root's non-finite inputs);
  /// `->message()` is the line to print. Empty when nothing was found or the option is off.
  std::optional<NonFinite> first_nonfinite() const {
    return nonfinite_ ? nonfinite_->first() : std::nullopt;
  }

 private:
  // Declared in this order so that the attachments are removed before the session dies.
  std::unique_ptr<detail::DebuggerSession> session_;
  std::unique_ptr<detail::AttachmentSet> attachments_;
  std::unique_ptr<detail::NonFiniteWatch> nonfinite_;
};

/// Traces every forward of `model` while the returned scope lives; see DebuggerOptions.
/// Throws tracetorch::Error if debug_path cannot be created or written.
///
/// \code
/// LlamaModel model(config);
/// {
///   auto guard = tracetorch::model_addition_debugger(model, {.debug_path = "dbg", .use_repr = false});
///   model({.input_ids = ids});  // dbg/LlamaModel_debug_tree_*.json and one .safetensors per tensor
/// }
/// \endcode
template <class ModuleType>
DebuggerScope model_addition_debugger(const std::shared_ptr<ModuleType>& model, DebuggerOptions options) {
#ifdef TRACETORCH_DISABLE
  // Compiled out: a scope that attaches nothing and writes nothing.
  (void)model, (void)options;
  return DebuggerScope(detail::ScopeAccess(), nullptr, std::make_unique<detail::AttachmentSet>());
#else
  static_assert(std::is_base_of_v<detail::TracedModuleBase, ModuleType>,
                "tracetorch::model_addition_debugger: the root module must be declared with TRACEABLE(Name)");
  if (!model) throw Error("tracetorch: model_addition_debugger: the model is empty (a null holder)");
  return detail::open_debugger(*model, std::string(model->traced_name()), std::move(options));
#endif
}

/// The same, for a TRACEABLE holder (`Tiny model; tracetorch::model_addition_debugger(model)`).
template <class ModuleType>
DebuggerScope model_addition_debugger(torch::nn::ModuleHolder<ModuleType>& model, DebuggerOptions options = {}) {
  return model_addition_debugger(model.ptr(), std::move(options));
}

namespace detail {

/// model_addition_debugger for a module known by reference and name.
inline DebuggerScope open_debugger(torch::nn::Module& model, const std::string& root_name, DebuggerOptions options) {
  auto attachments = std::make_unique<AttachmentSet>();
  const int rank = options.rank ? *options.rank : rank_from_environment();
  if (rank != 0) return DebuggerScope(ScopeAccess(), nullptr, std::move(attachments));
  if (options.debug_path.empty()) options.debug_path = ".";
  prepare_debug_path(options.debug_path);
  auto session = std::make_unique<DebuggerSession>(
      root_name, SessionOptions{.debug_path = std::move(options.debug_path),
                                .do_prune_layers = options.do_prune_layers,
                                .use_repr = options.use_repr,
                                .reuse_repeated_tensors = options.reuse_repeated_tensors,
                                .reuse_previous_files = options.reuse_previous_files,
                                .number_repeated_calls = options.repeated_call_files == RepeatedCallFiles::numbered});
  // Attached before the debugger: it enters each call after the debugger (under its no-grad
  // guard) and leaves it before.
  auto nonfinite = options.find_nonfinite ? std::make_unique<NonFiniteWatch>(model, root_name) : nullptr;
  attachments->attach(model, root_name, *session);
  session->watch(*attachments);
  return DebuggerScope(ScopeAccess(), std::move(session), std::move(attachments), std::move(nonfinite));
}

/// What `debug_io=true` in a call's options runs (detail/module/debug_io.hpp): the call, traced.
inline void run_debug_io(torch::nn::Module& root, std::string_view root_name, const DebugIoRequest& request,
                         const std::function<void()>& call) {
  const auto scope = open_debugger(root, std::string(root_name),
                                   {.debug_path = request.debug_io_dir, .do_prune_layers = request.prune_layers});
  call();
}

// Every translation unit that includes the debugger makes it reachable from debug_io calls (a
// non-inline static: its initializer runs at start-up whether or not anything names it).
[[maybe_unused]] static const bool debug_io_available = (debug_io_runner().store(&run_debug_io), true);

}  // namespace detail

}  // namespace tracetorch
