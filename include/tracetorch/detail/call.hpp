#pragma once
// What a traced call shows to whoever watches it (the debugger, output capture), without
// either side knowing the other's types: the module's attachments, and type-erased views of
// the call's arguments and result.

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tracetorch/detail/serialize.hpp"

namespace tracetorch::detail {

class CallObserver;
class TracedModuleBase;

/// One observer attached to one module instance. A module's attachments form a singly linked
/// list, newest first, so nested scopes attach and detach like a stack.
struct Attachment {
  CallObserver* observer = nullptr;
  TracedModuleBase* module = nullptr;
  std::string module_path;    // "<Root>.<named_modules path>", computed once at attach time
  bool is_root = false;
  bool has_children = false;  // Python's debugger prints no outputs for modules with children
  std::size_t tag = 0;        // the observer's own: which of its recorders this is
  Attachment* next = nullptr;
};

/// Base of every traced module: where attachments hang, and the registered name.
class TracedModuleBase {
 public:
  TracedModuleBase() = default;
  // Copies (Cloneable::clone) start with nothing attached.
  TracedModuleBase(const TracedModuleBase&) noexcept {}
  TracedModuleBase& operator=(const TracedModuleBase&) noexcept { return *this; }
  virtual ~TracedModuleBase() = default;

  /// The name given to TRACEABLE: the class name a transformers trace shows.
  virtual std::string_view traced_name() const noexcept = 0;

  std::atomic<Attachment*> attachments_{nullptr};
};

/// Receives the arguments of a call in order, each value announced as Python would pass it:
/// positional argument `index`, or keyword argument `name` (the fields of a keyword pack).
class ArgumentVisitor : public ValueVisitor {
 public:
  virtual void positional(std::size_t index) = 0;
  virtual void keyword(std::string_view name) = 0;

 protected:
  ~ArgumentVisitor() = default;
};

/// The arguments of a call, positional, as the observers may read them.
class CallArgs {
 public:
  virtual std::size_t size() const noexcept = 0;
  /// Argument `index` if it is a defined tensor, else an undefined tensor.
  virtual torch::Tensor tensor(std::size_t index) const = 0;
  /// Every argument, as `(*args, **kwargs)` in Python.
  virtual void visit(ArgumentVisitor& visitor) const = 0;

 protected:
  ~CallArgs() = default;
};

/// The value a call returned.
class CallResult {
 public:
  /// The result itself if it is a tensor (index 0), or element `index` of a tuple result.
  virtual torch::Tensor tensor(std::size_t index) const = 0;
  virtual void visit(ValueVisitor& visitor) const = 0;

 protected:
  ~CallResult() = default;
};

class CallObserver {
 public:
  virtual void on_enter(const Attachment& at, const CallArgs& args) = 0;
  virtual void on_exit(const Attachment& at, const CallResult& result) = 0;
  /// The forward threw: drop what on_enter started, restore what it changed.
  virtual void on_unwind(const Attachment& at) noexcept = 0;

 protected:
  ~CallObserver() = default;
};

template <class T>
torch::Tensor tensor_of(const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    return value;
  } else if constexpr (is_optional_like<U>) {
    return value.has_value() ? tensor_of(*value) : torch::Tensor();
  } else {
    return torch::Tensor();
  }
}

template <class... A>
class CallArgsOf final : public CallArgs {
 public:
  explicit CallArgsOf(const A&... args) : args_(args...) {}

  std::size_t size() const noexcept override { return sizeof...(A); }

  torch::Tensor tensor(std::size_t index) const override {
    torch::Tensor found;
    std::size_t i = 0;
    std::apply([&](const auto&... arg) { ((i++ == index ? void(found = tensor_of(arg)) : void()), ...); }, args_);
    return found;
  }

  void visit(ArgumentVisitor& visitor) const override {
    std::size_t index = 0;
    std::apply([&](const auto&... arg) { (visit_argument(arg, index, visitor), ...); }, args_);
  }

 private:
  template <class T>
  static void visit_argument(const T& arg, std::size_t& index, ArgumentVisitor& visitor) {
    if constexpr (is_keyword_pack<T>) {
      // Options structs travel as Python keyword arguments: only what was set is shown.
      tracetorch_keywords(arg, [&](std::string_view name, const auto& value) {
        visitor.keyword(name);
        visit_value(value, visitor);
      });
    } else {
      visitor.positional(index++);
      visit_value(arg, visitor);
    }
  }

  std::tuple<const A&...> args_;
};

template <class R>
class CallResultOf final : public CallResult {
 public:
  explicit CallResultOf(const R& result) : result_(result) {}

  torch::Tensor tensor(std::size_t index) const override {
    using U = std::remove_cvref_t<R>;
    if constexpr (is_tuple_like<U>) {
      torch::Tensor found;
      std::size_t i = 0;
      std::apply([&](const auto&... e) { ((i++ == index ? void(found = tensor_of(e)) : void()), ...); }, result_);
      return found;
    } else {
      return index == 0 ? tensor_of(result_) : torch::Tensor();
    }
  }

  void visit(ValueVisitor& visitor) const override { visit_value(result_, visitor); }

 private:
  const R& result_;
};

class VoidResult final : public CallResult {
 public:
  torch::Tensor tensor(std::size_t) const override { return {}; }
  void visit(ValueVisitor& visitor) const override { visitor.none(); }
};

/// Unwinds the attachments in [first, last), last entered first.
inline void unwind_attachments(Attachment* first, Attachment* last) noexcept {
  if (first == last) return;
  unwind_attachments(first->next, last);
  first->observer->on_unwind(*first);
}

/// Exits the attachments from `at` on, in the reverse of the order they were entered, so that
/// observers that save and restore state (grad mode) nest properly. If one throws, those it
/// would have been followed by are unwound instead.
inline void exit_attachments(Attachment* at, const CallResult& view) {
  if (at == nullptr) return;
  try {
    exit_attachments(at->next, view);
  } catch (...) {
    at->observer->on_unwind(*at);
    throw;
  }
  at->observer->on_exit(*at, view);
}

/// The slow path of a traced call, out of line so the untraced path stays small.
/// Contract with the observers: once on_enter has returned, exactly one of on_exit or on_unwind
/// follows; an observer whose on_enter or on_exit throws has cleaned up after itself.
template <class R, class Module, class Call, class... A>
[[gnu::noinline]] R traced_call(Module& /*module*/, Attachment* head, Call&& call, const A&... args) {
  Attachment* entered_end = head;
  try {
    const CallArgsOf<A...> view(args...);
    for (; entered_end != nullptr; entered_end = entered_end->next) entered_end->observer->on_enter(*entered_end, view);
  } catch (...) {
    unwind_attachments(head, entered_end);
    throw;
  }
  const auto finish = [head](const CallResult& view) { exit_attachments(head, view); };
  const auto run = [&]() -> R {
    try {
      return call();
    } catch (...) {
      unwind_attachments(head, nullptr);
      throw;
    }
  };
  if constexpr (std::is_void_v<R>) {
    run();
    finish(VoidResult());
  } else {
    R result = run();
    finish(CallResultOf<R>(result));
    return result;
  }
}

}  // namespace tracetorch::detail
