#pragma once
/// \file
/// Hanging observers on module instances and taking them off again: shared by the debugger
/// (every traced module) and output capture (the modules its recorders select).

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tracetorch/detail/module/call.hpp"

namespace tracetorch::detail {

/// Containers have no forward of their own (Python's ModuleList is never called either), so
/// they are not reported as untraced; their elements are checked on their own.
inline bool is_container(const torch::nn::Module& module) noexcept {
  return dynamic_cast<const torch::nn::ModuleListImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::ModuleDictImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::ParameterListImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::ParameterDictImpl*>(&module) != nullptr;
}

/// A set of attachments owned together; removed, newest first, on destruction.
class AttachmentSet {
 public:
  AttachmentSet() = default;
  AttachmentSet(const AttachmentSet&) = delete;
  AttachmentSet& operator=(const AttachmentSet&) = delete;
  ~AttachmentSet() { detach(); }

  /// Attaches `observer` to `root` and its traced descendants; paths are `<root_name>.<name>`.
  /// Modules that are not traced (and not containers) are listed in untraced().
  void attach(torch::nn::Module& root, const std::string& root_name, CallObserver& observer) {
    const auto named = root.named_modules("", /*include_self=*/true);
    std::unique_lock lock(attachment_mutex());
    attachments_.reserve(attachments_.size() + named.size());
    for (const auto& item : named) {
      auto* traced = dynamic_cast<TracedModuleBase*>(item.value().get());
      const std::string path = item.key().empty() ? root_name : root_name + "." + item.key();
      if (traced == nullptr) {
        if (!is_container(*item.value())) untraced_.push_back(path);
        continue;
      }
      add_locked(*traced, observer, path, item.key().empty(), !item.value()->children().empty(), 0);
    }
  }

  /// Attaches `observer` to one module; `tag` is handed back in Attachment::tag.
  void add(TracedModuleBase& module, CallObserver& observer, std::string module_path, std::size_t tag) {
    std::unique_lock lock(attachment_mutex());
    add_locked(module, observer, std::move(module_path), false, false, tag);
  }

  void detach() noexcept {
    std::unique_lock lock(attachment_mutex());
    for (auto it = attachments_.rbegin(); it != attachments_.rend(); ++it) {
      Attachment& at = **it;
      // Scopes normally end in reverse order; unlink from anywhere in the list if not.
      Attachment* head = at.module->attachments_.load(std::memory_order_acquire);
      if (head == &at) {
        at.module->attachments_.store(at.next, std::memory_order_release);
        continue;
      }
      for (Attachment* p = head; p != nullptr; p = p->next) {
        if (p->next == &at) {
          p->next = at.next;
          break;
        }
      }
    }
    attachments_.clear();
  }

  bool empty() const noexcept { return attachments_.empty(); }
  const std::vector<std::unique_ptr<Attachment>>& entries() const noexcept { return attachments_; }
  const std::vector<std::string>& untraced() const noexcept { return untraced_; }

 private:
  void add_locked(TracedModuleBase& module, CallObserver& observer, std::string module_path, bool is_root,
                  bool has_children, std::size_t tag) {
    auto& at = *attachments_.emplace_back(std::make_unique<Attachment>());
    at.observer = &observer;
    at.module = &module;
    at.module_path = std::move(module_path);
    at.is_root = is_root;
    at.has_children = has_children;
    at.tag = tag;
    at.next = module.attachments_.load(std::memory_order_acquire);
    module.attachments_.store(&at, std::memory_order_release);
  }

  std::vector<std::unique_ptr<Attachment>> attachments_;
  std::vector<std::string> untraced_;
};

}  // namespace tracetorch::detail
