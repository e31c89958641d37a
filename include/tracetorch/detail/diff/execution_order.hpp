#pragma once
/// \file
/// Execution order across two aligned traces: where a value or call recorded by the candidate
/// alone lies in the reference's order (so that the first divergence is the first in execution
/// order, whatever its kind), and calls present on both sides that ran in another order among
/// their siblings (DiffKind::order). No file is read here, and no LibTorch.

#include <algorithm>
#include <compare>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/diff/results.hpp"

namespace tracetorch::detail {

/// A call's place in its trace: its (renamed) module path and its number among that path's calls (1, 2, ...).
using CallKey = std::pair<std::string, std::size_t>;

/// A value's place in the reference's execution order. The reference's own event `o` is
/// {o, 1, 0}; what comes just before it {o, 0, seq}, `seq` keeping several such values in the
/// candidate's order.
struct ValueOrder {
  std::size_t major = 0, minor = 1, seq = 0;
  auto operator<=>(const ValueOrder&) const = default;
};

inline ValueOrder reference_order_of(const TraceSlot& slot) { return {slot.order, 1, 0}; }

/// Places what the candidate records alone: each just before the candidate's next event that
/// has a partner in the reference (a paired value, or the start or end of a paired call), at
/// that partner's place, after whatever the reference records alone there. So a value present
/// on one side only stays with its call's inputs or outputs, and a call on one side only lies
/// where it ran; with no paired event after it, after the whole reference.
class CandidatePlacer {
 public:
  void paired_call(const TraceCall& ref, const TraceCall& cand) {
    anchors_.push_back({{cand.enter_order, 0}, ref.enter_order});
    anchors_.push_back({{cand.exit_order, 1}, ref.exit_order});
  }
  void paired_value(const TraceSlot& ref, const TraceSlot& cand) { anchors_.push_back({{cand.order, 1}, ref.order}); }

  /// Where the candidate's event at `cand_order` (a value's order, or a call's start) goes.
  /// Call once every pair is known, with the candidate's one-sided events in its execution order.
  ValueOrder place(std::size_t cand_order) {
    if (!sorted_) {
      std::sort(anchors_.begin(), anchors_.end(), [](const Anchor& a, const Anchor& b) { return a.at < b.at; });
      sorted_ = true;
    }
    const std::pair<std::size_t, std::size_t> at{cand_order, 1};
    const auto next = std::upper_bound(anchors_.begin(), anchors_.end(), at, [](const auto& p, const Anchor& a) { return p < a.at; });
    return {next == anchors_.end() ? std::numeric_limits<std::size_t>::max() : next->reference_order, 0, ++seq_};
  }

 private:
  struct Anchor {
    std::pair<std::size_t, std::size_t> at;  ///< the candidate's event: {order, 0} a call's start, {order, 1} a value or a call's end
    std::size_t reference_order;             ///< its partner's order in the reference
  };
  std::vector<Anchor> anchors_;
  bool sorted_ = false;
  std::size_t seq_ = 0;
};

namespace call_order {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

/// Each call's parent (kNone for a top-level call), from the pre-order and the depths.
inline std::vector<std::size_t> parents(const Trace& trace) {
  std::vector<std::size_t> out(trace.calls.size(), kNone), open;
  for (std::size_t i = 0; i < trace.calls.size(); ++i) {
    while (open.size() > trace.calls[i].depth) open.pop_back();
    if (!open.empty() && open.size() == trace.calls[i].depth) out[i] = open.back();
    open.push_back(i);
  }
  return out;
}

/// The calls each call made, in order; the last list holds the top-level calls.
inline std::vector<std::vector<std::size_t>> children(const std::vector<std::size_t>& parent) {
  std::vector<std::vector<std::size_t>> out(parent.size() + 1);
  for (std::size_t i = 0; i < parent.size(); ++i) out[parent[i] == kNone ? parent.size() : parent[i]].push_back(i);
  return out;
}

/// The positions of a longest increasing subsequence of `values` (distinct), marked true.
inline std::vector<bool> longest_increasing(const std::vector<std::size_t>& values) {
  std::vector<std::size_t> tails, before(values.size(), kNone);  // tails: index of the smallest end of each length
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto at = std::lower_bound(tails.begin(), tails.end(), values[i],
                                     [&](std::size_t t, std::size_t v) { return values[t] < v; });
    if (at != tails.begin()) before[i] = *std::prev(at);
    if (at == tails.end()) tails.push_back(i);
    else *at = i;
  }
  std::vector<bool> kept(values.size(), false);
  for (std::size_t i = tails.empty() ? kNone : tails.back(); i != kNone; i = before[i]) kept[i] = true;
  return kept;
}

/// A call's name below its parent's path: "gate_proj", "act_fn (call 2)".
inline std::string sibling_name(const CallKey& key, const std::string& parent_path) {
  std::string name = key.first;
  if (!parent_path.empty() && name.size() > parent_path.size() + 1 && name.starts_with(parent_path) && name[parent_path.size()] == '.') {
    name = name.substr(parent_path.size() + 1);
  }
  return key.second > 1 ? name + " (call " + std::to_string(key.second) + ")" : name;
}

/// At most this many siblings of each order are kept for the report, around the first place
/// where the orders part: a model's root can make thousands of calls.
inline constexpr std::size_t kOrderWindow = 24;

/// The names of `calls` (reference indices) from `first` on, at most kOrderWindow of them,
/// "..." where the list is cut.
inline std::vector<std::string> order_names(const std::vector<std::size_t>& calls, std::size_t first, const std::vector<CallKey>& keys,
                                            const std::string& parent_path) {
  std::vector<std::string> out;
  const std::size_t begin = first > 2 ? first - 2 : 0, end = std::min(calls.size(), begin + kOrderWindow);
  if (begin > 0) out.emplace_back("...");
  for (std::size_t i = begin; i < end; ++i) out.push_back(sibling_name(keys[calls[i]], parent_path));
  if (end < calls.size()) out.emplace_back("...");
  return out;
}

/// One parent's calls present on both sides: in the reference's order (`ref`) and in the
/// candidate's (`cand`, the same reference indices). Each call that ran elsewhere (outside a
/// longest common order) is an order difference, placed at the start of the reference's call
/// that ran where the candidate's order first parts from it.
inline void compare_siblings(const Trace& ref, const std::vector<std::size_t>& in_ref, const std::vector<std::size_t>& in_cand,
                             const std::vector<CallKey>& keys, const std::string& parent, const std::string& parent_path,
                             std::vector<std::pair<ValueOrder, TensorDiff>>& out) {
  if (in_ref == in_cand) return;
  std::vector<std::size_t> rank(ref.calls.size(), kNone), ranks;
  for (std::size_t i = 0; i < in_ref.size(); ++i) rank[in_ref[i]] = i;
  for (const auto call : in_cand) ranks.push_back(rank[call]);
  const auto kept = longest_increasing(ranks);
  std::size_t first = 0;
  while (in_ref[first] == in_cand[first]) ++first;
  for (std::size_t i = 0; i < in_cand.size(); ++i) {
    if (kept[i]) continue;
    TensorDiff d;
    d.module_path = keys[in_cand[i]].first;
    d.call = keys[in_cand[i]].second;
    d.status = DiffStatus::order_differs;
    d.is_tensor = false;
    d.order_parent = parent;
    d.reference_order = order_names(in_ref, first, keys, parent_path);
    d.candidate_order = order_names(in_cand, first, keys, parent_path);
    const auto& starts = ref.calls[in_ref[std::min(i, ranks[i])]];
    out.push_back({{starts.enter_order, 0, 0}, std::move(d)});  // before what the placer puts there (seq >= 1)
  }
}

}  // namespace call_order

/// Calls present on both sides (`match[i]`: the candidate's partner of the reference's call i,
/// or call_order::kNone) whose parents are partners too, compared parent by parent: each call
/// that ran in another order among its siblings, as an order difference at its place.
inline std::vector<std::pair<ValueOrder, TensorDiff>> sibling_order_differences(const Trace& ref, const Trace& cand,
                                                                                 const std::vector<CallKey>& keys,
                                                                                 const std::vector<std::size_t>& match) {
  using call_order::kNone;
  const auto ref_parent = call_order::parents(ref), cand_parent = call_order::parents(cand);
  std::vector<std::size_t> ref_of(cand.calls.size(), kNone);
  for (std::size_t i = 0; i < match.size(); ++i) {
    if (match[i] != kNone) ref_of[match[i]] = i;
  }
  const auto ref_children = call_order::children(ref_parent), cand_children = call_order::children(cand_parent);
  std::vector<std::pair<ValueOrder, TensorDiff>> out;
  for (std::size_t p = 0; p <= ref.calls.size(); ++p) {
    const bool top = p == ref.calls.size();
    const std::size_t partner = top ? cand.calls.size() : match[p];
    if (partner == kNone) continue;
    // Calls of this parent whose partners the partner parent made, in each side's order.
    std::vector<std::size_t> in_ref, in_cand;
    for (const auto c : ref_children[p]) {
      if (match[c] != kNone && cand_parent[match[c]] == (top ? kNone : partner)) in_ref.push_back(c);
    }
    for (const auto j : cand_children[partner]) {
      if (ref_of[j] != kNone && ref_parent[ref_of[j]] == (top ? kNone : p)) in_cand.push_back(ref_of[j]);
    }
    const std::string parent = top ? std::string() : keys[p].second > 1 ? keys[p].first + " (call " + std::to_string(keys[p].second) + ")" : keys[p].first;
    call_order::compare_siblings(ref, in_ref, in_cand, keys, parent, top ? std::string() : keys[p].first, out);
  }
  return out;
}

}  // namespace tracetorch::detail
