#pragma once
/// \file
/// A non-finite sentinel hung on a model's traced modules for as long as a watch lives: what
/// the debugger's option, the standalone scope and a call's `find_nonfinite` option each hold.

#include <torch/torch.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/nonfinite/finding.hpp"
#include "tracetorch/detail/nonfinite/sentinel.hpp"

namespace tracetorch::detail {

class NonFiniteWatch {
 public:
  NonFiniteWatch(torch::nn::Module& model, std::string root_name) : sentinel_(root_name) {
    attachments_.attach(model, root_name, sentinel_);
  }
  NonFiniteWatch(const NonFiniteWatch&) = delete;
  NonFiniteWatch& operator=(const NonFiniteWatch&) = delete;
  /// A forward another thread is following runs to its end before the attachments go.
  ~NonFiniteWatch() {
    sentinel_.close();
    attachments_.detach();
  }

  std::optional<NonFinite> first() const { return sentinel_.first(); }
  void clear() { sentinel_.clear(); }
  const std::vector<std::string>& untraced() const noexcept { return attachments_.untraced(); }

 private:
  NonFiniteSentinel sentinel_;  // declared first: it outlives its attachments
  AttachmentSet attachments_;
};

/// An options struct whose `find_nonfinite` says where a call's finding goes (OutputOptions).
template <class T>
concept has_nonfinite_keyword = requires(const T& options) {
  { options.find_nonfinite } -> std::convertible_to<std::optional<NonFinite>*>;
};

template <class... A>
inline constexpr bool any_nonfinite_keywords = (has_nonfinite_keyword<std::remove_cvref_t<A>> || ...);

/// The first `find_nonfinite` the call's arguments set, else null.
template <class... A>
std::optional<NonFinite>* nonfinite_request(const A&... args) {
  std::optional<NonFinite>* request = nullptr;
  const auto look = [&](const auto& arg) {
    if constexpr (has_nonfinite_keyword<std::remove_cvref_t<decltype(arg)>>) {
      if (request == nullptr) request = arg.find_nonfinite;
    }
  };
  (look(args), ...);
  return request;
}

/// True on a thread while a call asked for find_nonfinite runs: its own traced forward, entered
/// again under the watch, and sub-models given the same options do not start another.
inline bool& nonfinite_running() {
  thread_local bool running = false;
  return running;
}

/// Runs `call` (the traced forward of `root` again) under a watch rooted at `root`; `found`
/// is emptied first and holds the finding after, also where the call throws. `root` may be a
/// module whose forward is const: attaching touches only its attachment list, which tracing
/// owns, not what const promises of the module.
template <class R, class Call>
R run_finding_nonfinite(const torch::nn::Module& root, std::string_view root_name, std::optional<NonFinite>& found,
                        Call&& call) {
  found.reset();
  struct Running {
    Running() { nonfinite_running() = true; }
    ~Running() { nonfinite_running() = false; }
  } running;
  NonFiniteWatch watch(const_cast<torch::nn::Module&>(root), std::string(root_name));
  struct Report {
    NonFiniteWatch& watch;
    std::optional<NonFinite>& found;
    ~Report() {
      try {
        found = watch.first();
      } catch (...) {  // only bad_alloc: `found` stays empty
      }
    }
  } report{watch, found};
  return call();
}

}  // namespace tracetorch::detail
