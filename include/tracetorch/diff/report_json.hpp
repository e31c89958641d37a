#pragma once
/// \file
/// DiffReport::json(): the report as JSON, part by part (options, counts, first divergence,
/// accept and argument-name rules, missing calls, modules, every compared value). Non-finite
/// numbers as strings.

#include <boost/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "tracetorch/diff/report.hpp"

namespace tracetorch {

namespace detail::report_json {

/// The traces and the options the diff ran with.
inline void options(const DiffReport& report, boost::json::object& out) {
  out["reference"] = report.reference_file.string();
  out["candidate"] = report.candidate_file.string();
  out["reference_values"] = report.reference_values;
  out["candidate_values"] = report.candidate_values;
  out["atol"] = report.atol;
  out["rtol"] = report.rtol;
  out["precision_tolerance"] = report.precision_tolerance;
  boost::json::array maps;
  for (const auto& r : report.renames) maps.push_back(boost::json::string(r.pattern + "=>" + r.replacement));
  out["maps"] = std::move(maps);
  out["precision_limited_to_printed_digits"] = report.precision_limited();
  out["notes"] = boost::json::array(report.notes.begin(), report.notes.end());
}

/// A call out of order: its parent and both orders of the parent's calls.
inline void add_order(const TensorDiff& t, boost::json::object& row) {
  row["order_parent"] = t.order_parent;
  row["reference_order"] = boost::json::array(t.reference_order.begin(), t.reference_order.end());
  row["candidate_order"] = boost::json::array(t.candidate_order.begin(), t.candidate_order.end());
}

/// The verdict, the differences counted, and where the first divergence is.
inline void verdict(const DiffReport& report, boost::json::object& out) {
  const auto n = report.counts();
  out["within_tolerance"] = n.not_accepted == 0;
  boost::json::object kinds;
  for (const auto kind : kDiffKinds) kinds[to_string(kind)] = n.of(kind);
  // Related counts share a line: one side and the other, accepted or not, how values were named.
  out["differences"] = {
      {"by_kind", std::move(kinds)},
      {"values_only_in_reference", n.values_only_in_reference}, {"values_only_in_candidate", n.values_only_in_candidate},
      {"calls_only_in_reference", n.calls_only_in_reference}, {"calls_only_in_candidate", n.calls_only_in_candidate},
      {"accepted", n.accepted}, {"not_accepted", n.not_accepted},
      {"naming", n.naming}, {"naming_by_rule", n.naming_by_rule}, {"rule_over_order", n.rule_over_order},
      {"across_dtypes", n.across_dtypes}, {"tensors", n.tensors}, {"other_values", n.other_values},
      {"overwritten_in_reference", n.overwritten_in_reference}, {"overwritten_in_candidate", n.overwritten_in_candidate}};
  if (report.first_divergence) {
    const auto& t = report.tensors[*report.first_divergence];
    boost::json::object first{{"module_path", t.module_path}, {"call", t.call}, {"location", t.location},
                              {"candidate_location", t.naming_differs() ? t.candidate_location : t.location},
                              {"status", to_string(t.status)}, {"kind", to_string(*t.kind())}, {"index", *report.first_divergence}};
    if (t.is_order()) add_order(t, first);
    out["first_divergence"] = std::move(first);
  } else {
    out["first_divergence"] = nullptr;
  }
}

inline boost::json::array rules(const DiffReport& report) {
  boost::json::array rows;
  for (const auto& rule : report.rules) {
    rows.push_back(boost::json::object{{"origin", rule.origin()}, {"pattern", rule.pattern()}, {"kind", to_string(rule.kind)},
                                       {"reason", rule.reason}, {"matched", rule.matched}, {"stale", rule.matched == 0}});
  }
  return rows;
}

inline boost::json::array arg_names(const DiffReport& report) {
  boost::json::array rows;
  for (const auto& rule : report.arg_names) {
    rows.push_back(boost::json::object{{"origin", rule.origin()},
                                       {"pattern", rule.module_pattern},
                                       {"names", boost::json::array(rule.names.begin(), rule.names.end())},
                                       {"calls", rule.calls},
                                       {"matched", rule.matched},
                                       {"stale", rule.matched == 0}});
  }
  return rows;
}

/// {"rule": FILE:LINE, "reason": ...} for an accepted difference, else null.
inline boost::json::value accepted(const DiffReport& report, const std::optional<std::size_t>& rule) {
  if (!rule) return nullptr;
  return boost::json::object{{"rule", report.rules[*rule].origin()}, {"reason", report.rules[*rule].reason}};
}

inline boost::json::array missing_calls(const DiffReport& report) {
  boost::json::array rows;
  for (const auto& c : report.missing_calls) {
    rows.push_back(boost::json::object{{"module_path", c.module_path}, {"call", c.call},
                                       {"only_in", c.in_reference ? "reference" : "candidate"},
                                       {"accepted", accepted(report, c.accepted_by)}});
  }
  return rows;
}

inline boost::json::array modules(const DiffReport& report) {
  boost::json::array rows;
  for (const auto& m : report.modules()) {
    rows.push_back(boost::json::object{{"module_path", m.module_path},
                                       {"tensors", m.tensors},
                                       {"other_values", m.other_values},
                                       {"diverging", m.diverging},
                                       {"accepted", m.accepted},
                                       {"calls_only_in_reference", m.calls_only_in_reference},
                                       {"calls_only_in_candidate", m.calls_only_in_candidate},
                                       {"calls_out_of_order", m.calls_out_of_order},
                                       {"overwritten", m.overwritten},
                                       {"note", m.note()},
                                       {"compared", m.compared},
                                       {"out_of_tolerance", m.out_of_tolerance},
                                       {"max_abs_error", number_json(m.max_abs_error)},
                                       {"max_rel_error", number_json(m.max_rel_error)},
                                       {"min_cosine_similarity", number_json(m.min_cosine_similarity)},
                                       {"tolerance_ratio", number_json(m.tolerance_ratio)}});
  }
  return rows;
}

/// One compared value; its errors and tolerance only where elements were compared.
inline boost::json::object value(const DiffReport& report, const TensorDiff& t) {
  const auto kind = t.kind();
  boost::json::object row{{"module_path", t.module_path},
                          {"call", t.call},
                          {"location", t.location},
                          {"candidate_location", t.naming_differs() ? t.candidate_location : t.location},
                          {"naming_rule", t.naming_rule ? boost::json::value(report.arg_names[*t.naming_rule].origin())
                                                        : boost::json::value(nullptr)},
                          {"order_would_pair", t.rule_over_order() ? boost::json::value(t.order_location) : boost::json::value(nullptr)},
                          {"status", to_string(t.status)},
                          {"kind", kind ? boost::json::value(to_string(*kind)) : boost::json::value(nullptr)},
                          {"accepted", accepted(report, t.accepted_by)},
                          {"is_tensor", t.is_tensor},
                          {"printed", t.printed},
                          {"call_missing", t.call_missing},
                          {"root_output_from_file", t.from_file},
                          {"reference_shape", t.reference_shape}, {"candidate_shape", t.candidate_shape},
                          {"reference_dtype", t.reference_dtype}, {"candidate_dtype", t.candidate_dtype},
                          {"compared", t.compared},
                          {"out_of_tolerance", t.out_of_tolerance}};
  // A value whose file holds another call's value: which call's, per side (null: its own).
  const auto holds = [](std::size_t call) { return call > 0 ? boost::json::value(call) : boost::json::value(nullptr); };
  row["reference_file_holds_call"] = holds(t.reference_file_holds_call);
  row["candidate_file_holds_call"] = holds(t.candidate_file_holds_call);
  if (t.is_order()) add_order(t, row);
  if (t.compared > 0) {
    row["max_abs_error"] = number_json(t.max_abs_error);
    row["max_rel_error"] = number_json(t.max_rel_error);
    row["cosine_similarity"] = number_json(t.cosine_similarity);
    row["tolerance_ratio"] = number_json(t.tolerance_ratio);
    row["atol"] = t.atol;
    row["rtol"] = t.rtol;
  }
  return row;
}

}  // namespace detail::report_json

inline boost::json::object DiffReport::json() const {
  namespace part = detail::report_json;
  boost::json::object out;
  part::options(*this, out);
  part::verdict(*this, out);
  out["rules"] = part::rules(*this);
  out["arg_names"] = part::arg_names(*this);
  boost::json::array only_ref(only_in_reference.begin(), only_in_reference.end());
  boost::json::array only_cand(only_in_candidate.begin(), only_in_candidate.end());
  out["only_in_reference"] = std::move(only_ref);
  out["only_in_candidate"] = std::move(only_cand);
  out["missing_calls"] = part::missing_calls(*this);
  out["modules"] = part::modules(*this);
  boost::json::array rows;
  for (const auto& t : tensors) rows.push_back(part::value(*this, t));
  out["tensors"] = std::move(rows);
  return out;
}

}  // namespace tracetorch
