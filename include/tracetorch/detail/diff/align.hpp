#pragma once
/// \file
/// Aligning two parsed traces, no file read: calls by (renamed) module path and call order,
/// values by their place in the call, and a value passed as args.N on one side and as
/// kwargs.NAME on the other by an argument-name rule (arg_names.hpp) where one names it, else
/// by its position among the call's inputs. Everything in one execution order, calls that ran
/// in another order among their siblings included (execution_order.hpp).

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/diff/arg_names.hpp"
#include "tracetorch/detail/diff/execution_order.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/diff/results.hpp"

namespace tracetorch::detail {

/// One value of an aligned call (or of a call on one side only), before its values are compared.
struct AlignedValue {
  ValueOrder order;  ///< execution order: the reference's, with what the candidate records alone placed in it
  TensorDiff diff;  ///< placed and named; status only_in_* for a value on one side
  const TraceSlot* reference = nullptr;
  const TraceSlot* candidate = nullptr;
};

struct Alignment {
  std::vector<AlignedValue> values;  ///< in execution order
  std::vector<CallDiff> missing_calls;
};

/// "inputs.<key>": where the values of the top-level input `key` ("args.0", "kwargs.mask") lie.
inline std::string input_location(const std::string& key) {
  return trace_format::kInputs + (trace_format::kLocationSeparator + key);
}

/// `location` is `prefix` or a place below it ("inputs.args.1.0" under "inputs.args.1").
inline bool is_at_or_under(std::string_view location, std::string_view prefix) {
  return location == prefix || (location.starts_with(prefix) && location[prefix.size()] == trace_format::kLocationSeparator);
}

/// The index in `call.input_keys` of the top-level input that holds the value at `location`.
inline std::optional<std::size_t> input_position(const TraceCall& call, std::string_view location) {
  for (std::size_t i = 0; i < call.input_keys.size(); ++i) {
    if (is_at_or_under(location, input_location(call.input_keys[i]))) return i;
  }
  return std::nullopt;
}

/// The values under one top-level input, as (place below it, is a tensor): its structure.
inline std::vector<std::pair<std::string, bool>> input_structure(const TraceCall& call, const std::string& key) {
  std::vector<std::pair<std::string, bool>> out;
  const std::string prefix = input_location(key);
  for (const auto& slot : call.inputs) {
    if (is_at_or_under(slot.location, prefix)) out.emplace_back(slot.location.substr(prefix.size()), slot.is_tensor);
  }
  return out;
}

/// For a reference input left without a partner by name: the candidate's location of the same
/// value when one side passes it positionally (`args.N`) and the other by keyword
/// (`kwargs.NAME`): the same position among the call's inputs, neither name used on the other
/// side, and the same structure below it. Empty when the recorded order does not allow it.
inline std::string renamed_input(const TraceCall& ref, const TraceCall& cand, const std::string& location) {
  const auto position = input_position(ref, location);
  if (!position || *position >= cand.input_keys.size()) return {};
  const std::string& ref_key = ref.input_keys[*position];
  const std::string& cand_key = cand.input_keys[*position];
  const auto positional = [](const std::string& key) { return key.starts_with(std::string(trace_format::kArgs) + trace_format::kLocationSeparator); };
  const auto keyword = [](const std::string& key) { return key.starts_with(std::string(trace_format::kKwargs) + trace_format::kLocationSeparator); };
  if (!((positional(ref_key) && keyword(cand_key)) || (keyword(ref_key) && positional(cand_key)))) return {};
  const auto has = [](const TraceCall& call, const std::string& key) {
    return std::find(call.input_keys.begin(), call.input_keys.end(), key) != call.input_keys.end();
  };
  if (has(cand, ref_key) || has(ref, cand_key)) return {};
  if (input_structure(ref, ref_key) != input_structure(cand, cand_key)) return {};
  return input_location(cand_key) + location.substr(input_location(ref_key).size());
}

/// A note where the two traces' roots (their first calls) differ after the renames: then no call
/// aligns and every one is listed as only in one trace, which this one line explains.
inline std::optional<std::string> different_roots(const Trace& ref, const Trace& cand,
                                                  const std::function<std::string(std::string)>& rename) {
  if (ref.calls.empty() || cand.calls.empty()) return std::nullopt;
  const auto& ref_root = ref.calls.front().module_path;
  const auto& cand_root = cand.calls.front().module_path;
  if (rename(ref_root) == rename(cand_root)) return std::nullopt;
  return "the roots differ: " + ref_root + " in the reference, " + cand_root +
         " in the candidate, so no module path is shared; if they are one model under two names, a rename aligns them "
         "(tracetorch-diff --map '" + ref_root + "=>" + cand_root + "')";
}

/// Each call's key, in the trace's order: the k-th call of a (renamed) path is numbered k.
inline std::vector<CallKey> number_calls(const Trace& trace, const std::function<std::string(std::string)>& rename) {
  std::vector<CallKey> keys;
  std::map<std::string, std::size_t> seen;
  for (const auto& call : trace.calls) {
    auto path = rename(call.module_path);
    const auto k = ++seen[path];
    keys.emplace_back(std::move(path), k);
  }
  return keys;
}

/// A call's values, its inputs then its outputs.
inline std::vector<const TraceSlot*> all_slots(const TraceCall& call) {
  std::vector<const TraceSlot*> slots;
  for (const auto& s : call.inputs) slots.push_back(&s);
  for (const auto& s : call.outputs) slots.push_back(&s);
  return slots;
}

/// Appends one value: `reference` or `candidate` is null for a value on one side only.
inline void add_value(Alignment& out, ValueOrder order, const CallKey& key, const TraceSlot* reference,
                      const TraceSlot* candidate, DiffStatus status, bool call_missing) {
  const TraceSlot* some = reference != nullptr ? reference : candidate;
  TensorDiff d;
  d.module_path = key.first;
  d.call = key.second;
  d.location = some->location;
  d.status = status;
  d.is_tensor = some->is_tensor;
  d.call_missing = call_missing;
  d.from_file = (reference != nullptr && reference->from_file_only) || (candidate != nullptr && candidate->from_file_only);
  if (reference != nullptr && candidate != nullptr && candidate->location != reference->location) d.candidate_location = candidate->location;
  out.values.push_back({order, std::move(d), reference, candidate});
}

/// A call on one side only: the call, and each of its values, missing from the other side.
/// The reference's values are placed at their own order; the candidate's are placed later
/// (CandidatePlacer), once every pair is known.
inline void add_one_sided_call(Alignment& out, const TraceCall& call, const CallKey& key, bool in_reference) {
  out.missing_calls.push_back({key.first, key.second, in_reference, std::nullopt});
  const auto status = in_reference ? DiffStatus::only_in_reference : DiffStatus::only_in_candidate;
  for (const auto* slot : all_slots(call)) {
    add_value(out, in_reference ? reference_order_of(*slot) : ValueOrder{}, key, in_reference ? slot : nullptr,
              in_reference ? nullptr : slot, status, true);
  }
}

/// The top-level input key that holds the value at `location` ("kwargs.pe" for
/// "inputs.kwargs.pe.0"); empty for an output.
inline std::string input_key_of(const TraceCall& call, std::string_view location) {
  const auto position = input_position(call, location);
  return position ? call.input_keys[*position] : std::string();
}

/// `location` under the keyword `rule` gives its input: "inputs.args.1.0" -> "inputs.kwargs.pe.0".
inline std::string keyword_location(const ArgNamesRule& rule, const TraceCall& call, const std::string& location) {
  const auto key = input_key_of(call, location);
  if (key.empty()) return location;
  return input_location(keyword_key(rule, key)) + location.substr(input_location(key).size());
}

/// The argument-name rule of one aligned call pair, if any, with the candidate's values by the
/// keyword location the rule gives them.
struct CallNaming {
  ArgNamesRule* rule = nullptr;
  std::size_t index = 0;  ///< of `rule` among the rules
  std::map<std::string, std::string> other_by_keyword;  ///< keyword location -> the candidate's location
};

inline CallNaming call_naming(std::span<ArgNamesRule> rules, const std::string& module_path, const TraceCall& other) {
  CallNaming naming;
  const auto index = arg_names_rule_for(rules, module_path);
  if (!index) return naming;
  naming.rule = &rules[*index];
  naming.index = *index;
  ++naming.rule->calls;
  for (const auto* slot : all_slots(other)) {
    naming.other_by_keyword.emplace(keyword_location(*naming.rule, other, slot->location), slot->location);
  }
  return naming;
}

/// Where the candidate has a reference value not found under its own name, and what decided it.
struct Partner {
  std::string location;        ///< the candidate's location; empty: none
  bool by_rule = false;        ///< the rule names the value (or the one the order offers): it decides
  std::string order_location;  ///< where the recorded order alone would pair it, when the rule decided otherwise
};

/// The rule decides wherever it names the value or the value the recorded order offers; else
/// the recorded order does (renamed_input).
inline Partner find_partner(const TraceCall& call, const TraceCall& other, const std::string& location, const CallNaming& naming) {
  Partner out;
  const auto order = renamed_input(call, other, location);
  const auto named = [&](const TraceCall& c, const std::string& at) { return names_key(*naming.rule, input_key_of(c, at)); };
  if (naming.rule == nullptr || !(named(call, location) || (!order.empty() && named(other, order)))) {
    out.location = order;
    return out;
  }
  out.by_rule = true;
  const auto found = naming.other_by_keyword.find(keyword_location(*naming.rule, call, location));
  if (found != naming.other_by_keyword.end()) out.location = found->second;
  if (!order.empty() && order != out.location) out.order_location = order;
  return out;
}

/// The values of two aligned calls, paired by location, then args.N against kwargs.NAME (by
/// the call's argument-name rule, or by position); the pairs are told to `placer`, and the
/// candidate's values left over are placed later, once every pair is known.
inline void align_call_values(Alignment& out, const TraceCall& call, const TraceCall& other, const CallKey& key,
                              CandidatePlacer& placer, const CallNaming& naming = {}) {
  placer.paired_call(call, other);
  std::map<std::string, const TraceSlot*> other_slots;
  for (const auto* slot : all_slots(other)) other_slots.emplace(slot->location, slot);
  for (const auto* slot : all_slots(call)) {
    auto match = other_slots.find(slot->location);
    Partner partner;
    if (match == other_slots.end()) {
      // Not there by name: perhaps passed positionally on one side and by keyword on the other.
      partner = find_partner(call, other, slot->location, naming);
      if (!partner.location.empty()) match = other_slots.find(partner.location);
    }
    if (match == other_slots.end()) {
      add_value(out, reference_order_of(*slot), key, slot, nullptr, DiffStatus::only_in_reference, false);
    } else {
      add_value(out, reference_order_of(*slot), key, slot, match->second, DiffStatus::within_tolerance, false);
      placer.paired_value(*slot, *match->second);
      other_slots.erase(match);
    }
    if (partner.by_rule && (out.values.back().diff.naming_differs() || !partner.order_location.empty())) {
      out.values.back().diff.naming_rule = naming.index;
      out.values.back().diff.order_location = partner.order_location;
      ++naming.rule->matched;
    }
  }
  for (const auto* slot : all_slots(other)) {
    if (other_slots.count(slot->location) == 0) continue;
    add_value(out, ValueOrder{}, key, nullptr, slot, DiffStatus::only_in_candidate, false);
  }
}

/// Places the candidate's one-sided values (those with no reference slot), in its execution order.
inline void place_candidate_values(Alignment& out, CandidatePlacer& placer) {
  std::vector<AlignedValue*> alone;
  for (auto& value : out.values) {
    if (value.reference == nullptr) alone.push_back(&value);
  }
  std::sort(alone.begin(), alone.end(), [](const AlignedValue* a, const AlignedValue* b) { return a->candidate->order < b->candidate->order; });
  for (auto* value : alone) value->order = placer.place(value->candidate->order);
}

/// Sorts the calls on one side only into execution order, each at its start (`orders`, parallel).
inline void sort_missing_calls(Alignment& out, const std::vector<ValueOrder>& orders) {
  std::vector<std::size_t> index(orders.size());
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = i;
  std::stable_sort(index.begin(), index.end(), [&](std::size_t a, std::size_t b) { return orders[a] < orders[b]; });
  std::vector<CallDiff> sorted;
  for (const auto i : index) sorted.push_back(std::move(out.missing_calls[i]));
  out.missing_calls = std::move(sorted);
}

/// Where a value's file holds another call's value (TraceSlot::overwritten_by), that call's number.
inline void note_overwritten(Alignment& out, const std::vector<CallKey>& ref_keys, const std::vector<CallKey>& cand_keys) {
  for (auto& value : out.values) {
    if (value.reference != nullptr && value.reference->overwritten_by) value.diff.reference_file_holds_call = ref_keys[*value.reference->overwritten_by].second;
    if (value.candidate != nullptr && value.candidate->overwritten_by) value.diff.candidate_file_holds_call = cand_keys[*value.candidate->overwritten_by].second;
  }
}

/// Aligns two parsed traces: calls by (renamed) module path and call order, values by their
/// place in the call, then args.N against kwargs.NAME by `arg_names` (the first rule matching a
/// call's renamed path; each rule's `calls` and `matched` are counted) or else by position.
/// No file is read here.
inline Alignment align_traces(const Trace& ref, const Trace& cand, const std::function<std::string(std::string)>& rename,
                              std::span<ArgNamesRule> arg_names = {}) {
  const auto ref_keys = number_calls(ref, rename);
  const auto cand_keys = number_calls(cand, rename);
  std::map<CallKey, std::size_t> cand_index;
  for (std::size_t i = 0; i < cand_keys.size(); ++i) cand_index.emplace(cand_keys[i], i);

  Alignment out;
  CandidatePlacer placer;
  std::vector<std::size_t> match(ref.calls.size(), call_order::kNone);
  std::vector<bool> cand_matched(cand.calls.size(), false);
  std::vector<ValueOrder> missing_call_orders;
  for (std::size_t i = 0; i < ref.calls.size(); ++i) {
    const auto found = cand_index.find(ref_keys[i]);
    if (found == cand_index.end()) {
      add_one_sided_call(out, ref.calls[i], ref_keys[i], true);
      missing_call_orders.push_back({ref.calls[i].enter_order, 0, 0});
      continue;
    }
    match[i] = found->second;
    cand_matched[found->second] = true;
    const auto& other = cand.calls[found->second];
    align_call_values(out, ref.calls[i], other, ref_keys[i], placer, call_naming(arg_names, ref_keys[i].first, other));
  }
  for (std::size_t j = 0; j < cand.calls.size(); ++j) {
    if (!cand_matched[j]) add_one_sided_call(out, cand.calls[j], cand_keys[j], false);
  }
  place_candidate_values(out, placer);
  for (std::size_t j = 0; j < cand.calls.size(); ++j) {
    if (!cand_matched[j]) missing_call_orders.push_back(placer.place(cand.calls[j].enter_order));
  }
  sort_missing_calls(out, missing_call_orders);
  note_overwritten(out, ref_keys, cand_keys);
  for (auto& [order, diff] : sibling_order_differences(ref, cand, ref_keys, match)) out.values.push_back({order, std::move(diff)});
  std::stable_sort(out.values.begin(), out.values.end(),
                   [](const AlignedValue& a, const AlignedValue& b) { return a.order < b.order; });
  return out;
}

}  // namespace tracetorch::detail
