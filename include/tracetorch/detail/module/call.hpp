#pragma once
// What a traced call shows to whoever watches it (the debugger, output capture), without
// either side knowing the other's types: the module's attachments, and type-erased views of
// the call's arguments and result.

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/serialize.hpp"

namespace tracetorch::detail {

class CallObserver;
class TracedModuleBase;
struct ReplayRequest;  // detail/module/replay_arguments.hpp

/// One observer attached to one module instance. A module's attachments form a singly linked
/// list, newest first, so nested scopes attach and detach like a stack. The list is changed and
/// walked under attachment_mutex(): a call on one thread may walk past another thread's
/// attachments while that thread detaches them, and must never see them freed.
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
  /// Module replay: runs the forward on arguments rebuilt from a trace (Traced overrides it where
  /// the forward is one function); false where its signature is unknown. Never called otherwise.
  virtual bool replay_forward(ReplayRequest&) { return false; }

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
  /// Element `index` of a tuple result, or the result itself if it is not a tuple.
  virtual torch::Tensor tensor(std::size_t index) const = 0;
  virtual void visit(ValueVisitor& visitor) const = 0;

 protected:
  ~CallResult() = default;
};

/// Guards every module's attachment list: attaching and detaching take it exclusively, a traced
/// call shares it only while it walks the list to enter the observers (never during the forward).
inline std::shared_mutex& attachment_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

class CallObserver {
 public:
  /// Returns whether this observer follows the call (a call on another thread than the one it
  /// watches: false). on_exit or on_unwind comes only after a true; an observer that returned
  /// true stays alive until then (its owner detaches only after its own calls have returned,
  /// or waits for them).
  virtual bool on_enter(const Attachment& at, const CallArgs& args) = 0;
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
      (void)index;  // not a tuple: the whole result, whatever the index (as upstream's hooks)
      return tensor_of(result_);
    }
  }

  void visit(ValueVisitor& visitor) const override { visit_value(result_, visitor); }
  /// The result itself, for an observer that knows the forward's type (output capture's
  /// index functions).
  const R& value() const noexcept { return result_; }

 private:
  const R& result_;
};

class VoidResult final : public CallResult {
 public:
  torch::Tensor tensor(std::size_t) const override { return {}; }
  void visit(ValueVisitor& visitor) const override { visitor.none(); }
};

/// The attachments a call entered, in the order entered. Almost always one or two; the vector
/// is made only on the traced path, where writing or capturing costs far more.
using EnteredAttachments = std::vector<Attachment*>;

/// Unwinds the entered attachments, last entered first.
inline void unwind_attachments(const EnteredAttachments& entered) noexcept {
  for (auto it = entered.rbegin(); it != entered.rend(); ++it) (*it)->observer->on_unwind(**it);
}

/// Exits the entered attachments in the reverse of the order they were entered, so that
/// observers that save and restore state (grad mode) nest properly. If one throws, those it
/// would have been followed by are unwound instead. Like enter_attachments, kept out of line and
/// uncloned: one copy per program file instead of one per traced forward, less to optimize.
[[gnu::noinline, gnu::noclone]] inline void exit_attachments(const EnteredAttachments& entered, const CallResult& view) {
  for (std::size_t i = entered.size(); i-- > 0;) {
    try {
      entered[i]->observer->on_exit(*entered[i], view);
    } catch (...) {
      for (std::size_t j = i; j-- > 0;) entered[j]->observer->on_unwind(*entered[j]);
      throw;
    }
  }
}

/// Enters the observers attached to `module` that follow this call. The list is read under the
/// shared lock, so no other thread can free an attachment while this one passes it; the
/// attachments entered belong to observers that follow this thread, which keep them alive.
/// Not a template: one copy per program file, whatever the modules' signatures.
[[gnu::noinline, gnu::noclone]] inline EnteredAttachments enter_attachments(const TracedModuleBase& module, const CallArgs& view) {
  EnteredAttachments entered;
  std::shared_lock lock(attachment_mutex());
  try {
    for (Attachment* at = module.attachments_.load(std::memory_order_acquire); at != nullptr; at = at->next) {
      if (at->observer->on_enter(*at, view)) entered.push_back(at);
    }
  } catch (...) {
    unwind_attachments(entered);
    throw;
  }
  return entered;
}

/// The slow path of a traced call, out of line so the untraced path stays small.
/// Contract with the observers: once on_enter has returned true, exactly one of on_exit or
/// on_unwind follows; an observer whose on_enter or on_exit throws has cleaned up after itself.
template <class R, class Call, class... A>
[[gnu::noinline]] R traced_call(const TracedModuleBase& module, Call&& call, const A&... args) {
  const EnteredAttachments entered = enter_attachments(module, CallArgsOf<A...>(args...));
  if (entered.empty()) return call();  // another thread's observers only
  const auto run = [&]() -> R {
    try {
      return call();
    } catch (...) {
      unwind_attachments(entered);
      throw;
    }
  };
  if constexpr (std::is_void_v<R>) {
    run();
    exit_attachments(entered, VoidResult());
  } else {
    R result = run();
    exit_attachments(entered, CallResultOf<R>(result));
    return result;
  }
}

}  // namespace tracetorch::detail
