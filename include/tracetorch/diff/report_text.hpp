#pragma once
/// \file
/// DiffReport::text(): the human-readable report, section by section (header, verdict, naming
/// differences and argument-name rules, dtype notes, accepted differences, stale rules, worst
/// modules, every compared value).

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/diff/report.hpp"

namespace tracetorch {

namespace detail::report_text {

/// The traces, the tolerance and the notes on what was not compared.
inline void header(const DiffReport& report, std::string& out) {
  out += "reference: " + report.reference_file.string() + " (" + report.reference_values + " values, " +
         std::to_string(report.reference_calls) + " module calls)\n";
  out += "candidate: " + report.candidate_file.string() + " (" + report.candidate_values + " values, " +
         std::to_string(report.candidate_calls) + " module calls)\n";
  const bool widened = std::any_of(report.tensors.begin(), report.tensors.end(),
                                   [&](const TensorDiff& t) { return t.atol > report.atol || t.rtol > report.rtol; });
  out += "tolerance: |candidate - reference| <= " + number_text(report.atol, "%g") + " + " + number_text(report.rtol, "%g") +
         " * |reference|" +
         (widened ? std::string(" (bf16/fp16 pairs: at least twice the lower precision's epsilon)") : std::string()) + "\n";
  if (report.precision_limited()) {
    out += "note: values compared as printed (print(tensor): 4 significant digits, edge items only above 1000 elements); "
           "precision is limited to the printed digits, each tolerance widened by half a unit in the last digit\n";
  }
  for (const auto& note : report.notes) out += "note: " + note + "\n";
}

/// " (accepted, FILE:LINE: REASON)" for an accepted difference, else nothing.
inline std::string accepted_text(const DiffReport& report, const std::optional<std::size_t>& rule) {
  return rule ? " (accepted, " + report.rules[*rule].origin() + ": " + report.rules[*rule].reason + ")" : std::string();
}

/// What `compared` counts: a complex element counts twice, its real and its imaginary part.
inline std::string compared_unit(const TensorDiff& t) {
  if (t.printed) return "printed values";
  return trace_format::is_complex_dtype(t.reference_dtype) ? "real and imaginary parts" : "elements";
}

/// "a, b, c": a call order as the report writes it.
inline std::string order_text(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

/// Why a value was not compared: whose file holds which call's value.
inline std::string overwritten_text(const TensorDiff& t) {
  const auto side = [](const char* trace, std::size_t call) {
    return std::string("the ") + trace + "'s file holds call " + std::to_string(call) + "'s value";
  };
  std::string out;
  if (t.reference_file_holds_call > 0) out = side("reference", t.reference_file_holds_call);
  if (t.candidate_file_holds_call > 0) out += (out.empty() ? "" : ", ") + side("candidate", t.candidate_file_holds_call);
  return out;
}

/// A value's status with what explains it: its errors, or both sides' shapes, values or dtypes.
inline std::string detail_line(const TensorDiff& t) {
  std::string line = std::string(to_string(t.status));
  if (t.is_order()) {
    return line + ": among the calls of " + (t.order_parent.empty() ? std::string("the top level") : t.order_parent) +
           ", reference " + order_text(t.reference_order) + "; candidate " + order_text(t.candidate_order);
  }
  if (t.status == DiffStatus::overwritten) return line + ": " + overwritten_text(t) + " (not compared)";
  if (t.status == DiffStatus::out_of_tolerance) {
    line += ": " + std::to_string(t.out_of_tolerance) + " of " + std::to_string(t.compared) + " " +
            compared_unit(t) + ", max abs error " + number_text(t.max_abs_error) +
            ", max rel error " + number_text(t.max_rel_error) + ", cosine " + number_text(t.cosine_similarity, "%.6f");
  } else if (t.status == DiffStatus::shape_mismatch || t.status == DiffStatus::value_mismatch ||
             t.status == DiffStatus::structure_mismatch) {
    line += ": reference " + t.reference_shape + ", candidate " + t.candidate_shape;
  } else if (t.status == DiffStatus::dtype_mismatch) {
    line += ": reference " + t.reference_dtype + ", candidate " + t.candidate_dtype;
  }
  return line;
}

/// `first divergence: ...` (a value, or a missing call that recorded no value), or `no divergence: ...`.
inline void first_divergence(const DiffReport& report, const DiffCounts& n, std::string& out) {
  if (report.first_divergence) {
    const auto& t = report.tensors[*report.first_divergence];
    out += "first divergence: " + t.where() + "\n";
    out += "  " + detail_line(t) + "\n";
    // A pair made across two names may be the wrong pair: say how it was made.
    if (t.naming_differs()) {
      out += "  paired with the candidate's " + t.candidate_location +
             (t.naming_rule ? " by rule " + report.arg_names[*t.naming_rule].origin()
                            : std::string(" by recorded position (an --arg-names rule can say which keyword each position is)")) +
             "\n";
    }
  } else if (n.not_accepted > 0) {  // only missing calls that recorded no value
    for (const auto& c : report.missing_calls) {
      if (c.accepted_by) continue;
      out += "first divergence: " + c.name() + ": module call only in " + (c.in_reference ? "reference" : "candidate") + "\n";
      break;
    }
  } else if (n.accepted == 0) {
    out += "no divergence: all " + std::to_string(n.tensors) + " tensors within tolerance, all " +
           std::to_string(n.other_values) + " other values equal\n";
  } else {
    out += "no divergence: " + std::to_string(n.tensors) + " tensors and " + std::to_string(n.other_values) +
           " other values compared; every difference is accepted\n";
  }
}

/// The `differences:` line and the `verdict:` line.
inline void verdict(const DiffCounts& n, std::string& out) {
  // Every kind is listed, zero or not, so that the line and the verdict below add up.
  // "name count" pairs, so that a count of 1 reads as well as any other.
  out += "differences: tensors out of tolerance " + std::to_string(n.of(DiffKind::values)) + ", non-tensor values " +
         std::to_string(n.of(DiffKind::non_tensor)) + ", shape " + std::to_string(n.of(DiffKind::shape)) + ", structure " +
         std::to_string(n.of(DiffKind::structure)) + ", dtype " + std::to_string(n.of(DiffKind::dtype)) + ", calls out of order " +
         std::to_string(n.of(DiffKind::order)) + "; values only in reference " + std::to_string(n.values_only_in_reference) + ", only in candidate " +
         std::to_string(n.values_only_in_candidate) + "; module calls only in reference " +
         std::to_string(n.calls_only_in_reference) + ", only in candidate " + std::to_string(n.calls_only_in_candidate) +
         " (of " + std::to_string(n.tensors) + " tensors and " + std::to_string(n.other_values) + " other values)\n";
  out += "verdict: differences " + std::to_string(n.total()) + ", accepted " + std::to_string(n.accepted) + ", not accepted " +
         std::to_string(n.not_accepted) + ": " + (n.not_accepted == 0 ? "within tolerance" : "diverges") + "\n";
}

/// The first five values that `pick` selects, a line each (`line`), then how many more.
template <class Pick, class Line>
void first_five(const DiffReport& report, std::size_t total, const Pick& pick, const Line& line, std::string& out) {
  std::size_t shown = 0;
  for (const auto& t : report.tensors) {
    if (t.call_missing || !pick(t)) continue;
    if (++shown > 5) {
      out += "  ... and " + std::to_string(total - 5) + " more\n";
      break;
    }
    out += "  " + t.where() + ": " + line(t) + "\n";
  }
}

/// " (rule FILE:LINE)" for a value whose partner an argument-name rule decided, else nothing.
inline std::string naming_rule_text(const DiffReport& report, const TensorDiff& t) {
  return t.naming_rule ? " (rule " + report.arg_names[*t.naming_rule].origin() + ")" : std::string();
}

/// Values aligned across args.N / kwargs.NAME, by position or by a rule; the values a rule
/// paired otherwise than the recorded order would; the rules that did it. The first five shown.
inline void naming(const DiffReport& report, const DiffCounts& n, std::string& out) {
  if (n.naming > 0) {
    out += "naming: values recorded positionally on one side and by keyword on the other, aligned by position: " +
           std::to_string(n.naming - n.naming_by_rule) +
           (n.naming_by_rule > 0 ? ", by rule: " + std::to_string(n.naming_by_rule) : std::string()) + "\n";
    first_five(report, n.naming, [](const TensorDiff& t) { return t.naming_differs(); },
               [&](const TensorDiff& t) {
                 return "reference " + t.location + ", candidate " + t.candidate_location + naming_rule_text(report, t);
               }, out);
  }
  if (n.rule_over_order > 0) {
    out += "naming rule over recorded order: " + std::to_string(n.rule_over_order) + " values\n";
    first_five(report, n.rule_over_order, [](const TensorDiff& t) { return t.rule_over_order(); },
               [&](const TensorDiff& t) {
                 return "rule " + report.arg_names[*t.naming_rule].origin() + " pairs it with " +
                        (t.status == DiffStatus::only_in_reference ? std::string("no candidate value")
                                                                   : t.naming_differs() ? t.candidate_location : t.location) +
                        "; the recorded order would pair it with " + t.order_location;
               }, out);
  }
  for (const auto& rule : report.arg_names) {
    if (rule.matched == 0) continue;
    out += "naming rule: " + rule.origin() + " " + rule.module_pattern + " " + rule.names_text() + ": decided " +
           std::to_string(rule.matched) + " values in " + std::to_string(rule.calls) + " calls\n";
  }
}

/// Tensors compared across dtypes, by pair of dtypes. Reported apart: the numbers were
/// compared, at the lower precision's tolerance.
inline void dtypes(const DiffReport& report, const DiffCounts& n, std::string& out) {
  if (n.across_dtypes == 0) return;
  std::map<std::string, std::pair<std::size_t, const TensorDiff*>> pairs;
  for (const auto& t : report.tensors) {
    if (!t.is_tensor || !t.across_dtypes() || t.call_missing) continue;
    auto& entry = pairs[t.reference_dtype + " against " + t.candidate_dtype];
    if (entry.first++ == 0) entry.second = &t;
  }
  for (const auto& [dtypes, entry] : pairs) {
    out += "dtypes: " + std::to_string(entry.first) + " tensors compared across dtypes, reference " + dtypes +
           " (both widened to float64), at atol " + number_text(entry.second->atol, "%g") + ", rtol " +
           number_text(entry.second->rtol, "%g") + "\n";
  }
}

/// Values not compared because a trace's file holds another call's value: not differences,
/// counted and shown apart. The first five shown.
inline void overwritten(const DiffReport& report, const DiffCounts& n, std::string& out) {
  const std::size_t total = n.overwritten_in_reference + n.overwritten_in_candidate;
  if (total == 0) return;
  out += "overwritten: values not compared, their file holding a later call's value (transformers' debugger keeps one file "
         "per module path): in the reference " + std::to_string(n.overwritten_in_reference) + ", in the candidate " +
         std::to_string(n.overwritten_in_candidate) + "\n";
  std::size_t values = 0;
  for (const auto& t : report.tensors) values += t.status == DiffStatus::overwritten ? 1 : 0;
  first_five(report, values, [](const TensorDiff& t) { return t.status == DiffStatus::overwritten; },
             [](const TensorDiff& t) { return overwritten_text(t); }, out);
}

/// Each rule that accepted something, with its reason and its first three differences.
inline void accepted(const DiffReport& report, const DiffCounts& n, std::string& out) {
  if (n.accepted == 0) return;
  out += "accepted differences:\n";
  for (std::size_t r = 0; r < report.rules.size(); ++r) {
    if (report.rules[r].matched == 0) continue;
    const auto& rule = report.rules[r];
    out += "  " + rule.origin() + " " + rule.pattern() + " " + to_string(rule.kind) + " (" + std::to_string(rule.matched) +
           "): " + rule.reason + "\n";
    std::size_t shown = 0;
    const auto show = [&](const std::string& line) {
      if (++shown <= 3) out += "    " + line + "\n";
    };
    for (const auto& c : report.missing_calls) {
      if (c.accepted_by == r) show(c.name() + ": module call only in " + (c.in_reference ? "reference" : "candidate"));
    }
    for (const auto& t : report.tensors) {
      if (t.accepted_by == r && !t.call_missing) show(t.where() + ": " + detail_line(t));
    }
    if (shown > 3) out += "    ... and " + std::to_string(shown - 3) + " more\n";
  }
}

inline void stale_rules(const DiffReport& report, std::string& out) {
  for (const auto* rule : report.stale_rules()) {
    out += "stale rule: " + rule->origin() + " " + rule->pattern() + " " + to_string(rule->kind) +
           " matched no difference (" + rule->reason + ")\n";
  }
  for (const auto* rule : report.stale_arg_names()) {
    out += "stale naming rule: " + rule->origin() + " " + rule->module_pattern + " " + rule->names_text() +
           " decided no value's partner (" +
           (rule->calls == 0 ? std::string("its pattern matched no call present in both traces")
                             : "it applied to " + std::to_string(rule->calls) + " calls, none of whose values needed it") +
           ")\n";
  }
}

/// The `worst` first rows of DiffReport::modules() as a table.
inline void worst_modules(const DiffReport& report, std::size_t worst, std::string& out) {
  const auto rows = report.modules();
  if (rows.empty() || worst == 0) return;
  char line[1024];
  std::size_t width = 6;
  for (std::size_t i = 0; i < rows.size() && i < worst; ++i) width = std::max(width, rows[i].module_path.size());
  out += "worst modules:\n";
  std::snprintf(line, sizeof line, "  %-*s %7s %5s %7s %18s %12s %12s %11s  %s\n", static_cast<int>(width), "module",
                "tensors", "other", "diverge", "out of tolerance", "max abs err", "max rel err", "min cosine", "note");
  out += line;
  for (std::size_t i = 0; i < rows.size() && i < worst; ++i) {
    const auto& m = rows[i];
    // No element compared (a call on one side only, non-tensor values): no numbers to show, not perfect ones.
    const bool numbers = m.compared > 0;
    const std::string count = numbers ? std::to_string(m.out_of_tolerance) + "/" + std::to_string(m.compared) : "-";
    std::snprintf(line, sizeof line, "  %-*s %7zu %5zu %7zu %18s %12s %12s %11s  %s", static_cast<int>(width),
                  m.module_path.c_str(), m.tensors, m.other_values, m.diverging, count.c_str(),
                  numbers ? number_text(m.max_abs_error).c_str() : "-", numbers ? number_text(m.max_rel_error).c_str() : "-",
                  numbers ? number_text(m.min_cosine_similarity, "%.6f").c_str() : "-", m.note().c_str());
    std::string text_line = line;
    while (!text_line.empty() && text_line.back() == ' ') text_line.pop_back();
    out += text_line + "\n";
  }
}

/// One line per compared value (`--all`).
inline void all_values(const DiffReport& report, std::string& out) {
  out += "all compared values:\n";
  for (const auto& t : report.tensors) {
    if (t.is_order()) {  // a call, not a value: the two orders say it all
      out += "  " + t.where() + ": " + detail_line(t) + accepted_text(report, t.accepted_by) + "\n";
      continue;
    }
    out += "  " + t.where() + ": " + to_string(t.status);
    if (t.is_tensor && t.compared > 0) {
      out += ", shape " + t.reference_shape + ", " + std::to_string(t.out_of_tolerance) + "/" + std::to_string(t.compared) +
             " out of tolerance, max abs " + number_text(t.max_abs_error) + ", max rel " + number_text(t.max_rel_error) +
             ", cosine " + number_text(t.cosine_similarity, "%.6f") + (t.printed ? " (printed)" : "");
    } else if (t.status != DiffStatus::within_tolerance || !t.is_tensor) {
      const auto side = [](const std::string& shape, const std::string& dtype) {
        return shape.empty() ? std::string("-") : dtype.empty() ? shape : shape + " " + dtype;
      };
      out += ", reference " + side(t.reference_shape, t.reference_dtype) + ", candidate " + side(t.candidate_shape, t.candidate_dtype);
    }
    if (t.naming_differs()) out += ", candidate names it " + t.candidate_location + naming_rule_text(report, t);
    if (t.rule_over_order()) out += ", the recorded order would pair it with " + t.order_location;
    if (t.is_tensor && t.across_dtypes()) out += ", across dtypes " + t.reference_dtype + " / " + t.candidate_dtype;
    if (t.from_file) out += " (root output, from its file)";
    if (t.status == DiffStatus::overwritten) out += ", " + overwritten_text(t) + " (not compared)";
    out += accepted_text(report, t.accepted_by) + "\n";
  }
}

}  // namespace detail::report_text

inline std::string DiffReport::text(bool all, std::size_t worst) const {
  namespace section = detail::report_text;
  std::string out;
  section::header(*this, out);
  for (const auto& c : missing_calls) {
    out += std::string(c.in_reference ? "only in reference: " : "only in candidate: ") + c.name() +
           section::accepted_text(*this, c.accepted_by) + "\n";
  }
  const auto n = counts();
  section::first_divergence(*this, n, out);
  section::verdict(n, out);
  section::naming(*this, n, out);
  section::dtypes(*this, n, out);
  section::overwritten(*this, n, out);
  section::accepted(*this, n, out);
  section::stale_rules(*this, out);
  section::worst_modules(*this, worst, out);
  if (all) section::all_values(*this, out);
  return out;
}

}  // namespace tracetorch
