#pragma once
/// \file
/// A non-finite sentinel hung on a model's traced modules for as long as a watch lives: what
/// the debugger's option, the standalone scope and a call's `find_nonfinite` option each hold.

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/module/nonfinite_request.hpp"
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

/// The sentinel's side of a call's `find_nonfinite` (detail/module/nonfinite_request.hpp), what
/// NonFiniteTarget's constructor (capture/output_options.hpp) hands the traced forward: `call`
/// runs under a watch rooted at `root`, and `found` holds the finding after, also where the call
/// throws.
template <class Found>
struct NonFiniteService {
  static void run(torch::nn::Module& root, std::string_view root_name, Found& found, const std::function<void()>& call) {
    found.reset();
    NonFiniteWatch watch(root, std::string(root_name));
    struct Report {
      NonFiniteWatch& watch;
      Found& found;
      ~Report() {
        try {
          found = watch.first();
        } catch (...) {  // only bad_alloc: `found` stays empty
        }
      }
    } report{watch, found};
    call();
  }
};

}  // namespace tracetorch::detail
