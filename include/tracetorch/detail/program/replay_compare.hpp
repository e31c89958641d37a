#pragma once
/// \file
/// Judging one replayed call against its reference: its outputs (where the reference recorded
/// them) and the arguments it passed to each module it called, value by value with the diff's
/// tolerance and cross-dtype rules (detail/diff/compare.hpp).

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tracetorch/replay/types.hpp"
#include "tracetorch/detail/program/replay_observer.hpp"
#include "tracetorch/detail/program/replay_values.hpp"
#include "tracetorch/detail/text/message_text.hpp"
#include "tracetorch/detail/diff/compare.hpp"

namespace tracetorch::detail {

/// The running verdict of one call: statistics over its tensors, the first difference named.
struct CallJudgement {
  ReplayedCall& out;
  const std::vector<AcceptRule>& rules;
  bool compared_any = false;

  void differs(const std::string& why) {
    if (out.status != ReplayStatus::diverges) out.reason = why;
    out.status = ReplayStatus::diverges;
  }
  /// A difference of `kind` at `location` of a call of `module_path`: accepted by the first rule
  /// that matches it, as the diff's rules match, else the call diverges. Whether it was accepted.
  bool differs(DiffKind kind, const std::string& module_path, const std::string& location, const std::string& why) {
    for (const auto& rule : rules) {
      if (!rule_matches(rule, kind, module_path, location.empty() ? std::nullopt : std::optional<std::string_view>(location))) continue;
      out.accepted.push_back(why + ": " + to_string(kind) + " accepted (" + rule.reason + ")");
      return true;
    }
    differs(why);
    return false;
  }
};

/// Where a value sits: the module whose call it belongs to, and a phrase for messages.
struct ValuePlace {
  const std::string& module_path;
  std::string where;  // "its", "the call of X: its"
};

/// One recorded value against the replay's value at the same place (`replayed` null: missing).
inline void judge_value(const Trace& ref, const TraceSlot& r, const TraceSlot* replayed, const MemoryTensorEncoder& tensors,
                        const ValuePlace& place, const ReplayOptions& options, CallJudgement& judgement) {
  const std::string at = place.where + " " + r.location;
  const auto differs = [&](DiffKind kind, const std::string& why) {
    return judgement.differs(kind, place.module_path, r.location, at + why);
  };
  if (!r.is_tensor && slot_python_value(r).kind == PythonValue::Kind::object) return;  // an object's repr is no value
  if (replayed == nullptr) return (void)differs(DiffKind::missing_value, ": recorded, but the replay has no value there");
  judgement.compared_any = true;
  const TraceSlot& c = *replayed;
  if (r.is_tensor != c.is_tensor) return (void)differs(DiffKind::structure, ": a tensor on one side only");
  if (!r.is_tensor) {
    if (r.text != c.text) differs(DiffKind::non_tensor, ": " + c.text + " where the reference has " + r.text);
    return;
  }
  if (r.shape != c.shape) {
    return (void)differs(DiffKind::shape, ": shape " + shape_for_message(c.shape) + " where the reference has " + shape_for_message(r.shape));
  }
  if (r.dtype != c.dtype && !comparable_across_dtypes(r.dtype, c.dtype)) {
    return (void)differs(DiffKind::dtype, ": " + c.dtype + " where the reference has " + r.dtype);
  }
  const auto [atol, rtol] = pair_tolerance(r.dtype, c.dtype, Tolerance{options.atol, options.rtol, options.precision_tolerance});
  ErrorAccumulator acc{atol, rtol};
  compare_tensors(tensors.tensor(c), load_trace_tensor(ref, r), acc);
  if (acc.out_of_tolerance > 0) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, ": %lld of %lld elements out of tolerance, max abs error %.3g",
                  static_cast<long long>(acc.out_of_tolerance), static_cast<long long>(acc.compared), acc.max_abs);
    if (differs(DiffKind::values, numbers)) return;  // accepted: its errors are not the call's
  }
  ReplayedCall& out = judgement.out;
  out.elements_compared += acc.compared;
  out.elements_out_of_tolerance += acc.out_of_tolerance;
  out.max_abs = acc.nan_error ? std::nan("") : std::max(out.max_abs, acc.max_abs);
  out.max_rel = acc.nan_error ? std::nan("") : std::max(out.max_rel, acc.max_rel);
}

/// Whether a replayed value sits where a recorded one does. A root output known only from its
/// file ("outputs.past_key_values_0_0") names its place by the file's stem: compared as such.
inline bool same_place(const TraceSlot& recorded, const TraceSlot& replayed) {
  if (!recorded.from_file_only) return recorded.location == replayed.location;
  std::string stem = replayed.location;
  std::replace(stem.begin() + static_cast<std::ptrdiff_t>(std::min(stem.size(), std::string_view(trace_format::kOutputs).size() + 1)),
               stem.end(), trace_format::kLocationSeparator, trace_format::kStemSeparator);
  return stem == recorded.location;
}

/// Every recorded value of `recorded` against `replayed`'s value at the same place; a value only
/// the replay has is a difference too.
inline void judge_slots(const Trace& ref, const std::vector<TraceSlot>& recorded, const std::vector<TraceSlot>& replayed,
                        const MemoryTensorEncoder& tensors, const ValuePlace& place, const ReplayOptions& options,
                        CallJudgement& judgement) {
  for (const auto& r : recorded) {
    const auto found = std::find_if(replayed.begin(), replayed.end(), [&](const TraceSlot& c) { return same_place(r, c); });
    judge_value(ref, r, found == replayed.end() ? nullptr : &*found, tensors, place, options, judgement);
  }
  // The root's outputs come from their files: its other values were never recorded.
  const bool files_only = !recorded.empty() && std::all_of(recorded.begin(), recorded.end(), [](const TraceSlot& r) { return r.from_file_only; });
  for (const auto& c : replayed) {
    if (!c.is_tensor && (files_only || slot_python_value(c).kind == PythonValue::Kind::object)) continue;
    const bool known = std::any_of(recorded.begin(), recorded.end(), [&](const TraceSlot& r) { return same_place(r, c); });
    if (!known) {
      judgement.differs(DiffKind::missing_value, place.module_path, c.location,
                        place.where + " " + c.location + ": passed by the replay, not recorded in the reference");
    }
  }
}

/// Judges the call `index` of `ref` from what `observer` saw while it was replayed.
inline void judge_replayed_call(const Trace& ref, std::size_t index, const ReplayObserver& observer, const ReplayOptions& options,
                                ReplayedCall& out) {
  CallJudgement judgement{out, options.accept};
  const TraceCall& call = ref.calls[index];
  if (!call.outputs.empty()) {
    const TraceCall replayed = slots_of(call.module_path, nullptr, observer.outputs());
    judge_slots(ref, call.outputs, replayed.outputs, observer.tensors(), {call.module_path, "its"}, options, judgement);
  }
  std::size_t child = 0;
  for (std::size_t j = index + 1; j < ref.calls.size() && ref.calls[j].depth > call.depth; ++j) {
    if (ref.calls[j].depth != call.depth + 1) continue;
    const TraceCall& recorded = ref.calls[j];
    if (child >= observer.children().size()) {
      judgement.differs(DiffKind::missing_call, recorded.module_path, {},
                        "it does not call " + recorded.module_path + " (call " + std::to_string(child) + " below it)");
      break;
    }
    const auto& seen = observer.children()[child++];
    if (seen.path != recorded.module_path) {
      judgement.differs(DiffKind::missing_call, recorded.module_path, {},
                        "it calls " + seen.path + " where the reference calls " + recorded.module_path);
      child = observer.children().size();  // aligned no further: nothing more to say of the calls after it
      break;
    }
    const TraceCall replayed = slots_of(seen.path, &seen.inputs, nullptr);
    judge_slots(ref, recorded.inputs, replayed.inputs, observer.tensors(), {seen.path, "the call of " + seen.path + ": its"}, options,
                judgement);
  }
  if (out.status != ReplayStatus::diverges && observer.children().size() > child) {
    judgement.differs("it calls " + observer.children()[child].path + " after the calls the reference recorded below it");
  }
  if (out.status != ReplayStatus::diverges && !judgement.compared_any) {
    out.status = ReplayStatus::not_replayable;
    out.reason = "the reference recorded nothing to compare: no outputs, no calls below it";
    out.hint = "trace the reference with use_repr=False; a module with children has its outputs compared through its children";
  }
}

}  // namespace tracetorch::detail
