#pragma once
/// \file
/// The non-finite sentinel: an observer of every traced call that names the first call whose
/// outputs hold NaN or Inf while its inputs were finite. One reduction per output tensor; a
/// call's inputs are checked only once one of its outputs is not finite (their values are still
/// those of the call's entry unless their version moved), the root's inputs on entry.

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/nonfinite/finding.hpp"
#include "tracetorch/detail/nonfinite/values.hpp"

namespace tracetorch::detail {

/// Follows one forward at a time, on the thread whose root call finds it free (other threads'
/// calls run unwatched meanwhile), and stops looking once it has found something.
class NonFiniteSentinel final : public CallObserver {
 public:
  explicit NonFiniteSentinel(std::string root_name) : root_name_(std::move(root_name)) {}

  bool on_enter(const Attachment& at, const CallArgs& args) override {
    if (found_any_.load(std::memory_order_relaxed)) return false;
    const auto me = std::this_thread::get_id();
    if (owner_.load(std::memory_order_relaxed) != me && !(at.is_root && claim(me))) return false;
    const bool outermost = depth_ == 0;
    if (outermost) calls_.clear();
    Frame& frame = push(at);
    try {
      frame.call = ++calls_[&at];
      const auto keep = [&frame](const std::string& location, const torch::Tensor& tensor) {
        frame.inputs.push_back({location, tensor, tensor.is_inference() ? -1 : static_cast<std::int64_t>(tensor._version())});
      };
      TensorLocations<decltype(keep)> inputs(trace_format::kInputs, keep);
      args.visit(inputs);
      if (outermost) check_root_inputs(frame);
    } catch (...) {
      pop();  // the call will not be followed: nothing of it stays
      throw;
    }
    return true;
  }

  void on_exit(const Attachment&, const CallResult& result) override {
    try {
      if (!found_any_.load(std::memory_order_relaxed)) check_outputs(frames_[depth_ - 1], result);
    } catch (...) {
      pop();
      throw;
    }
    pop();
  }

  void on_unwind(const Attachment&) noexcept override { pop(); }

  /// What was found first since the start or the last clear().
  std::optional<NonFinite> first() const {
    const std::lock_guard lock(found_mutex_);
    return found_;
  }
  /// Looks again from the next forward on.
  void clear() {
    const std::lock_guard lock(found_mutex_);
    found_.reset();
    found_any_.store(false);
  }

  /// The watch's end: no forward starts from now on, and one another thread is following ends
  /// before this returns (the debugger session's close() says why this order is safe).
  void close() noexcept {
    closing_.store(true);
    for (auto owner = owner_.load(); owner != std::thread::id() && owner != std::this_thread::get_id();
         owner = owner_.load()) {
      owner_.wait(owner);
    }
  }

 private:
  struct Input {
    std::string location;
    torch::Tensor tensor;
    std::int64_t version;  // -1: an inference tensor, which keeps no version
  };
  struct Frame {
    std::string_view path;
    int call = 0;
    bool root = false;
    std::vector<Input> inputs;  // kept between calls: their capacity is reused
  };

  bool claim(std::thread::id me) {
    std::thread::id nobody;
    if (!owner_.compare_exchange_strong(nobody, me)) return false;
    if (!closing_.load()) return true;
    release();
    return false;
  }
  void release() noexcept {
    owner_.store(std::thread::id());
    owner_.notify_all();
  }

  Frame& push(const Attachment& at) {
    if (depth_ == frames_.size()) frames_.emplace_back();
    Frame& frame = frames_[depth_++];
    frame.root = depth_ == 1;
    frame.path = frame.root ? std::string_view(root_name_) : std::string_view(at.module_path);
    return frame;
  }
  void pop() noexcept {
    frames_[--depth_].inputs.clear();  // no tensor outlives its call here
    if (depth_ == 0) release();
  }

  void check_root_inputs(const Frame& frame) {
    for (const auto& input : frame.inputs) {
      if (all_finite(input.tensor)) continue;
      record(frame, input.location, input.tensor, true, {});
      return;
    }
  }

  void check_outputs(const Frame& frame, const CallResult& result) {
    std::string location;
    torch::Tensor bad;
    const auto look = [&](const std::string& where, const torch::Tensor& tensor) {
      if (bad.defined() || all_finite(tensor)) return;
      bad = tensor;
      location = where;
    };
    TensorLocations<decltype(look)> outputs(trace_format::kOutputs, look);
    result.visit(outputs);
    if (!bad.defined()) return;
    std::vector<std::string> changed;
    for (const auto& input : frame.inputs) {
      if (input.version >= 0 && input.tensor._version() != input.version) {
        changed.push_back(input.location);  // its values on entry are gone
      } else if (!all_finite(input.tensor)) {
        return;  // it came in: a call it came from, or the caller's own code, made it
      }
    }
    record(frame, location, bad, false, std::move(changed));
  }

  void record(const Frame& frame, const std::string& location, const torch::Tensor& tensor, bool root_input,
              std::vector<std::string> changed) {
    NonFinite found{.module_path = std::string(frame.path), .call = frame.call, .location = location,
                    .in_root_inputs = root_input, .changed_in_place = std::move(changed)};
    count_nonfinite(tensor, found);
    const std::lock_guard lock(found_mutex_);
    found_ = std::move(found);
    found_any_.store(true);
  }

  std::string root_name_;
  std::atomic<std::thread::id> owner_{};
  std::atomic<bool> closing_{false};
  std::atomic<bool> found_any_{false};
  mutable std::mutex found_mutex_;
  std::optional<NonFinite> found_;
  // The owner thread's alone.
  std::vector<Frame> frames_;
  std::size_t depth_ = 0;
  std::unordered_map<const Attachment*, int> calls_;  // this forward's calls per module, as the debugger counts
};

}  // namespace tracetorch::detail
