// include/tracetorch/diff.hpp (results.hpp, report*.hpp) and tools/tracetorch_diff.cpp: one
// difference of each of the seven kinds in one hand-made trace pair, each counted once; the
// `differences:` line, the verdict, the JSON counts and the exit status agree, unaccepted and
// with every difference accepted by a rule of its kind.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using tracetorch::DiffKind;

using tracetorch_test::contains;
using tracetorch_test::printed;

boost::json::object call(const std::string& path, boost::json::object inputs, boost::json::value outputs) {
  return {{"module_path", path}, {"inputs", std::move(inputs)}, {"outputs", std::move(outputs)}};
}

/// The reference, or (`candidate`) the port with one difference of each kind.
fs::path write_trace(const fs::path& dir, bool candidate) {
  const auto x = printed("1.0000e+00, 2.0000e+00");
  const boost::json::object args{{"args", boost::json::array{x}}};
  boost::json::array children{
      call("M.values", args, candidate ? printed("3.0000e+00, 5.0000e+00") : printed("3.0000e+00, 4.0000e+00")),
      call("M.other", args, boost::json::string(candidate ? "3" : "None")),
      call("M.shape", args, candidate ? printed("1.0000e+00, 2.0000e+00, 3.0000e+00", "[3]") : x),
      call("M.structure", args, candidate ? boost::json::value(boost::json::string("None")) : boost::json::value(x)),
      call("M.dtype", args, candidate ? printed("1.0000e+00, 2.0000e+00", "[2]", "float64") : x),
      // A value on one side only, each way: the reference's mask, the candidate's scale.
      call("M.value", candidate ? boost::json::object{{"args", boost::json::array{x}}, {"kwargs", {{"scale", "2.0"}}}}
                                : boost::json::object{{"args", boost::json::array{x}}, {"kwargs", {{"mask", x}}}},
           x),
      call(candidate ? "M.extra" : "M.gone", args, x),
  };
  boost::json::object root{{"module_path", "M"}, {"inputs", {{"args", boost::json::array{}}}}, {"children", children}};
  fs::create_directories(dir);
  std::ofstream(dir / "M_debug_tree_FULL_TENSORS.json") << boost::json::serialize(root);
  return dir;
}

}  // namespace

DOCTEST_TEST_SUITE("diff kinds") {

DOCTEST_TEST_CASE("one difference of each kind: each counted once, and the summary, the JSON and the exit status agree") {
  tracetorch_test::TempDir dir;
  const auto ref = write_trace(dir / "ref", false);
  const auto cand = write_trace(dir / "cand", true);
  auto report = tracetorch::diff_traces(ref, cand);
  auto text = report.text();
  DOCTEST_INFO(text);
  const auto n = report.counts();
  for (const auto kind : {DiffKind::values, DiffKind::non_tensor, DiffKind::shape, DiffKind::structure, DiffKind::dtype}) {
    DOCTEST_INFO(tracetorch::to_string(kind));
    DOCTEST_CHECK(n.of(kind) == 1);
  }
  DOCTEST_CHECK(n.of(DiffKind::missing_value) == 2);
  DOCTEST_CHECK(n.of(DiffKind::missing_call) == 2);
  DOCTEST_CHECK((n.not_accepted == 9 && n.accepted == 0));
  DOCTEST_CHECK(contains(text, "differences: tensors out of tolerance 1, non-tensor values 1, shape 1, structure 1, dtype 1, calls out of order 0; "
                               "values only in reference 1, only in candidate 1; module calls only in reference 1, "
                               "only in candidate 1 (of 12 tensors and 2 other values)\n"));
  DOCTEST_CHECK(contains(text, "verdict: differences 9, accepted 0, not accepted 9: diverges\n"));
  DOCTEST_CHECK(contains(text, "first divergence: M.values outputs\n"));
  const auto json = report.json();
  for (const auto kind : tracetorch::kDiffKinds) {
    DOCTEST_CHECK(json.at("differences").at("by_kind").at(tracetorch::to_string(kind)).to_number<std::size_t>() == n.of(kind));
  }
  DOCTEST_CHECK(json.at("differences").at("not_accepted").to_number<int>() == 9);
  DOCTEST_CHECK(json.at("within_tolerance") == false);
  // Every module but the root diverges, and the table says why where no number does.
  std::size_t diverging = 0;
  for (const auto& m : report.modules()) diverging += m.diverges() ? 1 : 0;
  DOCTEST_CHECK(diverging == 8);

  // A rule of the right kind for each: all accepted, listed with their reasons, exit 0.
  tracetorch::DiffOptions options;
  options.accept = tracetorch::parse_accept_rules(
      "M.values values      reviewed\n"
      "M.other non-tensor   reviewed\n"
      "M.shape shape        reviewed\n"
      "M.structure structure reviewed\n"
      "M.dtype dtype        reviewed\n"
      "M.value missing-value reviewed\n"
      "M.gone missing-call  reviewed\n"
      "M.extra missing-call reviewed\n",
      "rules.txt");
  report = tracetorch::diff_traces(ref, cand, options);
  text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.stale_rules().empty());
  DOCTEST_CHECK(contains(text, "verdict: differences 9, accepted 9, not accepted 0: within tolerance\n"));
  DOCTEST_CHECK(contains(text, "no divergence: 12 tensors and 2 other values compared; every difference is accepted\n"));
  for (const auto& m : report.modules()) DOCTEST_CHECK(!m.diverges());

#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + cand.string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "verdict: differences 9, accepted 0, not accepted 9: diverges"));
  std::ofstream(dir / "rules.txt") << "M.* values reviewed\nM.* non-tensor reviewed\nM.* shape reviewed\nM.* structure reviewed\n"
                                      "M.* dtype reviewed\nM.* missing-value reviewed\nM.* missing-call reviewed\n";
  result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + cand.string() + " --accept " + (dir / "rules.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "verdict: differences 9, accepted 9, not accepted 0: within tolerance"));
  // One kind left unaccepted is enough to fail, and the verdict says 1.
  std::ofstream(dir / "rules.txt") << "M.* values reviewed\nM.* non-tensor reviewed\nM.* shape reviewed\nM.* structure reviewed\n"
                                      "M.* dtype reviewed\nM.* missing-value reviewed\n";
  result = tracetorch_test::run_program(TRACETORCH_DIFF, ref.string() + " " + cand.string() + " --accept " + (dir / "rules.txt").string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "verdict: differences 9, accepted 7, not accepted 2: diverges"));
#endif
}

}  // DOCTEST_TEST_SUITE
