// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp: every kind of mismatch counted, and
// accepted differences (--accept RULES): the rules parsed, each accepted difference reported with
// its reason, stale rules reported, a bad rules file refused (exit 2).

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

// A named namespace around the file: its using-declarations stay apart from the `contains` and
// `write_trace` of other test files compiled with it (unity build).
namespace diff_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::first_divergence;
using tracetorch_test::node;
using tracetorch_test::printed;
using tracetorch_test::TempDir;
using tracetorch_test::write_text;
using tracetorch_test::write_trace;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

/// M calls M.a (a tensor in, a cache object's repr out) and M.b; `cache` and `with_b` vary.
boost::json::object cache_model(const std::string& cache, bool with_b, bool with_c = false) {
  boost::json::array children{node("M.a", {{"args", boost::json::array{printed("1.0000e+00, 2.0000e+00")}}},
                                   boost::json::array{printed("3.0000e+00, 4.0000e+00"), boost::json::string(cache)})};
  if (with_b) children.push_back(node("M.b", {{"args", boost::json::array{printed("5.0000e+00, 6.0000e+00")}}}, printed("0.0000e+00, 1.0000e+00")));
  if (with_c) children.push_back(node("M.c", {{"args", boost::json::array{printed("5.0000e+00, 6.0000e+00")}}}, printed("0.0000e+00, 1.0000e+00")));
  return node("M", {{"args", boost::json::array{}}}, nullptr, children);
}

}  // namespace

DOCTEST_TEST_SUITE("diff") {

DOCTEST_TEST_CASE("every mismatch kind is counted: a non-tensor value, calls on one side only, and the summary agrees with the verdict") {
  TempDir dir;
  const auto ref = write_trace(dir / "ref", cache_model("DynamicCache(layers=[DynamicLayer])", true));
  // The port's cache prints another repr, M.b is not called and M.c is extra: no tensor is out of tolerance.
  const auto cand = write_trace(dir / "cand", cache_model("KVCache(1)", false, true));
  const auto report = tracetorch::diff_traces(ref, cand);
  const auto text = report.text();
  DOCTEST_INFO(text);
  const auto n = report.counts();
  DOCTEST_CHECK(n.of(tracetorch::DiffKind::values) == 0);
  DOCTEST_CHECK(n.of(tracetorch::DiffKind::non_tensor) == 1);
  DOCTEST_CHECK(n.of(tracetorch::DiffKind::missing_call) == 2);
  DOCTEST_CHECK(n.calls_only_in_reference == 1);
  DOCTEST_CHECK(n.calls_only_in_candidate == 1);
  DOCTEST_CHECK(n.not_accepted == 3);
  DOCTEST_CHECK(!report.within_tolerance());
  const auto json = report.json();
  DOCTEST_CHECK(json.at("differences").at("by_kind").at("non-tensor").to_number<std::size_t>() == 1);
  DOCTEST_CHECK(json.at("differences").at("not_accepted").to_number<std::size_t>() == 3);
  DOCTEST_CHECK(json.at("within_tolerance") == false);
  DOCTEST_CHECK(json.at("missing_calls").as_array().size() == 2);
  DOCTEST_CHECK(first_divergence(report) == "M.a outputs.1");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].kind() == tracetorch::DiffKind::non_tensor);
  DOCTEST_CHECK(contains(text, "differences: tensors out of tolerance 0, non-tensor values 1, shape 0, structure 0, "
                               "dtype 0, calls out of order 0; values only in reference 0, only in candidate 0; module calls only in "
                               "reference 1, only in candidate 1 (of 2 tensors and 1 other values)"));
  DOCTEST_CHECK(contains(text, "verdict: differences 3, accepted 0, not accepted 3: diverges"));
  // The worst-modules table: the missing calls and the non-tensor mismatch first, marked as such,
  // without the "0/0 ... cosine 1.000000" of a perfect match.
  const auto modules = report.modules();
  DOCTEST_REQUIRE(modules.size() == 3);  // M itself records no value
  for (const auto& m : modules) DOCTEST_CHECK(m.diverges());
  for (const auto& m : modules) {
    if (m.module_path == "M.a") DOCTEST_CHECK((m.non_tensor_mismatches == 1 && m.note() == "1 non-tensor value differs"));
    if (m.module_path == "M.b") DOCTEST_CHECK((m.calls_only_in_reference == 1 && m.note() == "call only in reference"));
    if (m.module_path == "M.c") DOCTEST_CHECK((m.calls_only_in_candidate == 1 && m.note() == "call only in candidate"));
  }
  const auto row = text.substr(text.find("\n  M.b "), text.find('\n', text.find("\n  M.b ") + 1) - text.find("\n  M.b "));
  DOCTEST_INFO(row);
  DOCTEST_CHECK(contains(row, "call only in reference"));
  DOCTEST_CHECK(!contains(row, "0/0"));
  DOCTEST_CHECK(!contains(row, "1.000000"));

  // A call that recorded no value at all still counts, and still fails the verdict.
  auto with_empty = cache_model("KVCache(1)", true);
  with_empty["children"].as_array().push_back(node("M.hook", {}));
  const auto empty_call = tracetorch::diff_traces(write_trace(dir / "empty", with_empty), write_trace(dir / "empty_cand", cache_model("KVCache(1)", true)));
  DOCTEST_INFO(empty_call.text());
  DOCTEST_CHECK(!empty_call.first_divergence.has_value());
  DOCTEST_CHECK(!empty_call.within_tolerance());
  DOCTEST_CHECK(contains(empty_call.text(), "first divergence: M.hook: module call only in reference"));

#ifdef TRACETORCH_DIFF
  const auto result = run_diff(ref.string() + " " + cand.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "verdict: differences 3, accepted 0, not accepted 3: diverges"));
  const auto same = run_diff(ref.string() + " " + ref.string());
  DOCTEST_CHECK(same.exit_code == 0);
  DOCTEST_CHECK(contains(same.output, "no divergence: all 4 tensors within tolerance, all 1 other values equal"));
  DOCTEST_CHECK(contains(same.output, "verdict: differences 0, accepted 0, not accepted 0: within tolerance"));
#endif
}

DOCTEST_TEST_CASE("accept rules: parsed with file and line, globs, malformed files refused") {
  using tracetorch::DiffKind;
  const auto rules = tracetorch::parse_accept_rules(
      "# reviewed differences\n"
      "\n"
      "M.layers.*.attn:outputs.1  non-tensor   the port's cache prints another repr  \r\n"
      "  M.rotary   missing-call the port computes it inline\n",
      "rules.txt");
  DOCTEST_REQUIRE(rules.size() == 2);
  DOCTEST_CHECK(rules[0].origin() == "rules.txt:3");
  DOCTEST_CHECK(rules[0].module_pattern == "M.layers.*.attn");
  DOCTEST_CHECK(rules[0].value_pattern == "outputs.1");
  DOCTEST_CHECK(rules[0].kind == DiffKind::non_tensor);
  DOCTEST_CHECK(rules[0].reason == "the port's cache prints another repr");
  DOCTEST_CHECK((rules[1].line == 4 && rules[1].kind == DiffKind::missing_call && rules[1].value_pattern.empty()));

  using tracetorch::detail::glob_match;
  DOCTEST_CHECK(glob_match("M.layers.*.attn", "M.layers.12.attn"));
  DOCTEST_CHECK(glob_match("*", ""));
  DOCTEST_CHECK(glob_match("M.?", "M.a"));
  DOCTEST_CHECK(!glob_match("M.?", "M.ab"));
  DOCTEST_CHECK(!glob_match("M.layers.*.attn", "M.layers.1.mlp"));
  DOCTEST_CHECK(glob_match("*a*b*c", "xxaxxbxxbxc"));

  const auto refusal = [](const std::string& text) {
    try {
      tracetorch::parse_accept_rules(text, "rules.txt");
    } catch (const tracetorch::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  DOCTEST_CHECK(contains(refusal("# one\nM values ok\nM.a foo why\n"), "rules.txt:3: unknown kind \"foo\" (one of values, non-tensor,"));
  DOCTEST_CHECK(contains(refusal("M.a\n"), "rules.txt:1: expected PATTERN KIND REASON"));
  DOCTEST_CHECK(contains(refusal("M.a dtype   \n"), "rules.txt:1: a rule needs a reason"));
  DOCTEST_CHECK(contains(refusal("M.a: dtype why\n"), "rules.txt:1: pattern \"M.a:\" is not MODULE or MODULE:VALUE"));
  DOCTEST_CHECK(contains(refusal("M.a:outputs missing-call why\n"), "rules.txt:1: a missing-call rule names a module"));
  DOCTEST_CHECK_THROWS_AS(tracetorch::load_accept_rules("/nonexistent/rules.txt"), tracetorch::Error);
}

DOCTEST_TEST_CASE("accepted differences: reported with their reason, not failing, stale rules reported, a bad rules file exits 2") {
  TempDir dir;
  const auto ref = write_trace(dir / "ref", cache_model("DynamicCache(layers=[DynamicLayer])", true));
  const auto cand = write_trace(dir / "cand", cache_model("KVCache(1)", false));
  write_text(dir / "rules.txt",
             "# reviewed: see the port's notes\n"
             "M.a:outputs.1   non-tensor    the port has its own cache type\n"
             "M.b             missing-call  the port fuses M.b into M.a\n"
             "M.*             dtype         a rule for a difference that is gone\n");
  tracetorch::DiffOptions options;
  options.accept = tracetorch::load_accept_rules(dir / "rules.txt");
  const auto report = tracetorch::diff_traces(ref, cand, options);
  const auto text = report.text(true);
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  const auto n = report.counts();
  DOCTEST_CHECK((n.accepted == 2 && n.not_accepted == 0));
  DOCTEST_CHECK(report.tensors[2].where() == "M.a outputs.1");
  DOCTEST_CHECK(report.tensors[2].accepted_by == 0u);
  DOCTEST_CHECK(report.missing_calls.at(0).accepted_by == 1u);
  DOCTEST_CHECK(contains(text, "verdict: differences 2, accepted 2, not accepted 0: within tolerance"));
  // Shown, with file, line and reason, never hidden.
  const std::string rules = (dir / "rules.txt").string();
  DOCTEST_CHECK(contains(text, "accepted differences:\n  " + rules + ":2 M.a:outputs.1 non-tensor (1): the port has its own cache type"));
  DOCTEST_CHECK(contains(text, "only in reference: M.b (accepted, " + rules + ":3: the port fuses M.b into M.a)"));
  DOCTEST_CHECK(contains(text, "M.a outputs.1: value mismatch, reference \"DynamicCache(layers=[DynamicLayer])\""));
  for (const auto& m : report.modules()) {
    if (m.module_path == "M.b") DOCTEST_CHECK((!m.diverges() && m.note() == "call only in reference, accepted"));
    if (m.module_path == "M.a") DOCTEST_CHECK((!m.diverges() && m.note() == "1 value difference accepted"));
  }
  DOCTEST_REQUIRE(report.stale_rules().size() == 1);
  DOCTEST_CHECK(report.stale_rules()[0]->line == 4);
  DOCTEST_CHECK(contains(text, "stale rule: " + rules + ":4 M.* dtype matched no difference"));
  const auto json = report.json();
  DOCTEST_CHECK(json.at("rules").as_array().at(2).at("stale") == true);
  DOCTEST_CHECK(json.at("tensors").as_array().at(2).at("accepted").at("reason") == "the port has its own cache type");

  // A rule for another kind of difference accepts nothing: the same non-tensor value still fails.
  options.accept = tracetorch::parse_accept_rules("M.a:outputs.1 values not this kind\n", "other.txt");
  DOCTEST_CHECK(!tracetorch::diff_traces(ref, cand, options).within_tolerance());

#ifdef TRACETORCH_DIFF
  auto result = run_diff(ref.string() + " " + cand.string() + " --accept " + rules);
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "the port has its own cache type"));
  DOCTEST_CHECK(contains(result.output, "stale rule: "));
  result = run_diff(ref.string() + " " + cand.string());
  DOCTEST_CHECK(result.exit_code == 1);
  write_text(dir / "bad.txt", "# fine\nM.a:outputs.1 non-tensor ok\nM.b foo why\n");
  result = run_diff(ref.string() + " " + cand.string() + " --accept " + (dir / "bad.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, (dir / "bad.txt").string() + ":3: unknown kind \"foo\""));
  result = run_diff(ref.string() + " " + cand.string() + " --accept " + (dir / "absent.txt").string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, (dir / "absent.txt").string() + ": cannot open"));
#endif
}

}  // DOCTEST_TEST_SUITE

}  // namespace diff_test
