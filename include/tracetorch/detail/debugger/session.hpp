#pragma once
/// \file
/// A debugger session: which thread's forward is recorded, nested calls of the root, and the
/// scope's end; each forward's tree, tensor records and files are built by the parts it owns.

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/detail/debugger/forward_memory.hpp"
#include "tracetorch/detail/debugger/tensor_record.hpp"
#include "tracetorch/detail/debugger/trace_files.hpp"
#include "tracetorch/detail/debugger/trace_tree.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch::detail {

/// The rank of this process in a multi-process run: $RANK, else 0.
inline int rank_from_environment() {
  const char* text = std::getenv("RANK");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long rank = std::strtol(text, &end, 10);
  if (*end != '\0') throw Error(std::string("tracetorch: RANK=") + text + " is not an integer");
  return static_cast<int>(rank);
}

/// What a session records, from DebuggerOptions (named as there) once its rank is known to be 0
/// and debug_path is made.
struct SessionOptions {
  std::filesystem::path debug_path;
  bool do_prune_layers;
  bool use_repr;
  bool reuse_repeated_tensors;
  bool reuse_previous_files;
  bool number_repeated_calls = true;  // repeated_call_files == numbered
};

/// Records the calls of one model's forward and writes the trace when the root returns. One
/// forward at a time: the thread whose root call finds the session free records, until that
/// root call returns; other threads' calls meanwhile run untraced.
class DebuggerSession final : public CallObserver {
 public:
  DebuggerSession(std::string root_name, const SessionOptions& options)
      : root_name_(std::move(root_name)),
        prune_layers_(options.do_prune_layers),
        number_repeated_calls_(options.number_repeated_calls),
        files_(root_name_, options.debug_path, options.reuse_previous_files, options.use_repr),
        records_(options.use_repr, options.reuse_repeated_tensors, files_, arena_) {}

  // CallObserver
  bool on_enter(const Attachment& at, const CallArgs& args) override {
    const auto me = std::this_thread::get_id();
    if (at.is_root && owner_.load(std::memory_order_relaxed) != me) return start_forward(at, args, me);
    if (owner_.load(std::memory_order_relaxed) != me) return false;
    if (at.is_root) ++nested_root_calls_;
    enter(at, args, false);
    return true;
  }

  void on_exit(const Attachment& at, const CallResult& result) override {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    if (at.is_root && nested_root_calls_ == 0) {
      try {
        finish_forward(result);
      } catch (...) {
        end_forward(false);
        throw;
      }
      end_forward(true);
      return;
    }
    if (at.is_root) --nested_root_calls_;
    const std::size_t files_before = tree_->innermost().files_before;
    try {
      tree_->exit(at, result);
    } catch (...) {
      discard_files_from(files_before);  // the model may catch this and go on
      throw;
    }
  }

  void on_unwind(const Attachment& at) noexcept override {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) return;
    if (at.is_root && nested_root_calls_ == 0) {
      end_forward(false);
      return;
    }
    if (at.is_root) --nested_root_calls_;
    if (tree_->empty()) return;
    // The model may catch the exception and go on: the failed call leaves no node and no file.
    discard_files_from(tree_->innermost().files_before);
    tree_->drop_innermost();
  }

  /// The attachments whose calls finish_forward checks (set once, after attaching).
  void watch(const AttachmentSet& attachments) noexcept { watched_ = &attachments; }
  const std::vector<std::string>& modules_not_called() const noexcept { return not_called_; }

  /// The scope's end: no forward starts from now on, and one that another thread is recording
  /// runs to its end, whole, before this returns; only then are the attachments freed.
  /// (closing_ is set before owner_ is read, and on_enter claims owner_ before reading closing_:
  /// either the claim sees the scope closing and backs out, or this sees the claim and waits.)
  void close() noexcept {
    closing_.store(true);
    for (auto owner = owner_.load(); owner != std::thread::id() && owner != std::this_thread::get_id();
         owner = owner_.load()) {
      owner_.wait(owner);
    }
  }

  /// Where the JSON files go, for error messages and tests.
  std::filesystem::path full_tensors_path() const { return files_.full_tensors_path(); }
  std::filesystem::path summary_path() const { return files_.summary_path(); }

 private:
  /// The root is called on a thread that is not recording: that thread records this forward
  /// where no other does and the scope is not ending.
  bool start_forward(const Attachment& at, const CallArgs& args, std::thread::id me) {
    // One compare-exchange, so that of two threads starting a forward at once exactly one
    // records; the other's forward runs untraced.
    std::thread::id nobody;
    if (!owner_.compare_exchange_strong(nobody, me)) return false;
    if (closing_.load()) {  // the scope is ending: no new forward (see close())
      release_owner();
      return false;
    }
    begin_forward();
    try {
      enter(at, args, true);
    } catch (...) {
      end_forward(false);
      throw;
    }
    return true;
  }

  void release_owner() noexcept {
    owner_.store(std::thread::id());
    owner_.notify_all();
  }

  void begin_forward() {
    no_grad_.emplace();
    files_.begin(arena_);
    records_.begin();
    tree_.emplace(arena_, records_, number_repeated_calls_);
    nested_root_calls_ = 0;
  }

  void end_forward(bool keep_files) noexcept {
    if (!keep_files) discard_files_from(0);
    files_.end(keep_files);
    records_.end();
    tree_.reset();
    arena_.rewind();  // nothing the forward allocated there is alive now
    no_grad_.reset();
    release_owner();
  }

  void enter(const Attachment& at, const CallArgs& args, bool root) {
    const std::size_t files_before = files_.count();
    try {
      tree_->enter(at, root ? std::string_view(root_name_) : std::string_view(at.module_path), args, root, files_before);
    } catch (...) {
      discard_files_from(files_before);
      throw;
    }
  }

  /// Removes the staged tensor files written since the forward had written `count`.
  void discard_files_from(std::size_t count) noexcept {
    files_.discard_from(count);
    records_.forget_files_from(count);
  }

  void finish_forward(const CallResult& result) {
    note_modules_not_called();
    const CallNode root = tree_->finish(root_name_, result, prune_layers_);
    files_.commit(root);
  }

  /// Traced modules that did not run through their traced forward in this forward: not called,
  /// or called through their Impl (`static_cast<LayerImpl&>(*layer).forward(x)`), which no
  /// observer can see. Warned about once per scope, on stderr, as the trace lacks them silently.
  void note_modules_not_called() {
    not_called_.clear();
    if (watched_ == nullptr) return;
    for (const auto& at : watched_->entries()) {
      if (!at->is_root && !tree_->called(*at)) not_called_.push_back(at->module_path);
    }
    if (not_called_.empty() || warned_not_called_) return;
    warned_not_called_ = true;
    const std::string warning = "tracetorch: warning: " + std::to_string(not_called_.size()) + " traced module(s) of " +
                                root_name_ + " did not run through their traced forward in this forward (first: " +
                                not_called_.front() +
                                "); a module called through its Impl is missing from the trace "
                                "(DebuggerScope::modules_not_called() lists them)\n";
    std::fputs(warning.c_str(), stderr);
  }

  std::string root_name_;
  bool prune_layers_;
  bool number_repeated_calls_;
  const AttachmentSet* watched_ = nullptr;
  std::vector<std::string> not_called_;
  bool warned_not_called_ = false;
  std::atomic<std::thread::id> owner_{};
  std::atomic<bool> closing_{false};
  int nested_root_calls_ = 0;

  // What one forward builds lives in arena_ (forward_memory.hpp says why): declared first, it
  // is destroyed after everything that points into it.
  ForwardArena arena_;
  TraceFiles files_;
  TensorRecorder records_;
  std::optional<CallTree> tree_;  // between begin_forward and end_forward
  std::optional<torch::NoGradGuard> no_grad_;
};

}  // namespace tracetorch::detail
