#pragma once
/// \file
/// The types of module replay's answer (tracetorch/replay.hpp): one entry per recorded call.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/diff/accept.hpp"

namespace tracetorch {

/// The tolerance a replayed call's outputs are judged by: the diff's rules (DiffOptions' atol,
/// rtol and precision_tolerance: |a - b| <= atol + rtol * |b|, widened to twice the epsilon of
/// a bf16/fp16 side), and the diff's accept rules.
struct ReplayOptions {
  double atol = 1e-5;
  double rtol = 1e-4;
  bool precision_tolerance = true;
  /// Reviewed known differences (tracetorch::load_accept_rules): a difference that a rule
  /// matches, by module path, value and kind as in the diff, does not make its call diverge; it
  /// is listed in the call's `accepted`. A missing-call rule accepts a recorded call below the
  /// replayed one that the port does not make (the children after it are then not compared).
  std::vector<AcceptRule> accept;
};

enum class ReplayStatus { match, diverges, not_replayable };

inline std::string_view replay_status_name(ReplayStatus status) {
  constexpr std::string_view names[] = {"match", "diverges", "not_replayable"};  // in the enum's order
  return names[static_cast<int>(status)];
}

/// One recorded call, replayed.
struct ReplayedCall {
  std::string path;      ///< "LlamaModel.layers.2.post_attention_layernorm"
  std::size_t call = 0;  ///< which call of that path, from 0
  std::size_t depth = 0;
  ReplayStatus status = ReplayStatus::match;
  /// Diverging: no diverging call lies below it, so its own code is where it differs.
  bool innermost = false;
  /// Why it diverges (the first value out of tolerance) or why it is not replayable.
  std::string reason;
  /// Not replayable: how it could be made so.
  std::string hint;
  /// A remark on a replayed call (an empty cache standing in for a recorded one).
  std::string note;
  /// The differences that accept rules accepted: "what: KIND accepted (REASON)".
  std::vector<std::string> accepted;
  double max_abs = 0, max_rel = 0;
  std::int64_t elements_out_of_tolerance = 0, elements_compared = 0;
};

struct ReplayReport {
  std::filesystem::path reference;
  /// Innermost diverging calls first (in execution order), then every other call in execution order.
  std::vector<ReplayedCall> calls;

  std::size_t count(ReplayStatus status) const {
    std::size_t n = 0;
    for (const auto& call : calls) n += call.status == status ? 1 : 0;
    return n;
  }
  std::vector<const ReplayedCall*> innermost_diverging() const {
    std::vector<const ReplayedCall*> out;
    for (const auto& call : calls) {
      if (call.status == ReplayStatus::diverges && call.innermost) out.push_back(&call);
    }
    return out;
  }
};

}  // namespace tracetorch
