#pragma once
/// \file
/// What module replay watches while one module runs on recorded inputs: the module's own result
/// and the arguments it passes to each module it calls directly, as JSON built by the debugger's
/// builder (call_json.hpp) with the tensors kept in memory.

#include <boost/json.hpp>

#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tracetorch/detail/debugger/call_json.hpp"
#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/program/replay_values.hpp"

namespace tracetorch::detail {

class ReplayObserver final : public CallObserver {
 public:
  struct ChildCall {
    std::string path;
    boost::json::value inputs;
  };

  /// Starts watching one replayed call (on this thread).
  void begin() {
    thread_ = std::this_thread::get_id();
    active_ = true;
    depth_ = 0;
    children_.clear();
    outputs_.reset();
    encoder_.clear();
  }
  void end() { active_ = false; }

  const std::vector<ChildCall>& children() const { return children_; }
  const boost::json::value* outputs() const { return outputs_ ? &*outputs_ : nullptr; }
  const MemoryTensorEncoder& tensors() const { return encoder_; }

  bool on_enter(const Attachment& at, const CallArgs& args) override {
    if (!active_ || std::this_thread::get_id() != thread_) return false;
    if (++depth_ == 2) {
      TraceJsonBuilder builder("c" + std::to_string(children_.size()) + trace_format::kInputsStem, encoder_, {});
      args.visit(builder);
      children_.push_back({at.module_path, boost::json::value(builder.take_arguments(false))});
    }
    return true;
  }
  void on_exit(const Attachment&, const CallResult& result) override {
    if (depth_-- == 1) {
      TraceJsonBuilder builder(trace_format::kOutputsStem + 1, encoder_, {});
      result.visit(builder);
      outputs_ = builder.take_value();
    }
  }
  void on_unwind(const Attachment&) noexcept override { --depth_; }

 private:
  bool active_ = false;
  std::thread::id thread_;
  int depth_ = 0;
  std::vector<ChildCall> children_;
  std::optional<boost::json::value> outputs_;
  MemoryTensorEncoder encoder_;
};

}  // namespace tracetorch::detail
