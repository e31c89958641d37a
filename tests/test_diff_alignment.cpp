// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp: how the calls and values of two
// traces are aligned: --map renames module paths first, the k-th call of a path meets the k-th,
// args.N on one side and kwargs.NAME on the other are aligned by position.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

#include <algorithm>

// A named namespace around the file: its using-declarations stay apart from the `contains` and
// `write_trace` of other test files compiled with it (unity build).
namespace diff_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::copy_trace;
using tracetorch_test::first_divergence;
using tracetorch_test::node;
using tracetorch_test::printed;
using tracetorch_test::TempDir;
using tracetorch_test::tiny;
using tracetorch_test::write_text;
using tracetorch_test::write_trace;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

}  // namespace

DOCTEST_TEST_SUITE("diff") {

DOCTEST_TEST_CASE("--map renames module paths before alignment") {
  TempDir dir;
  // A port whose blocks are called Model.blocks.N: the same trace with other module paths.
  const auto renamed = copy_trace(tiny() / "trace_st", dir / "renamed");
  const auto json_file = renamed / "LlamaModel_debug_tree_FULL_TENSORS.json";
  std::string text = tracetorch_test::read_file(json_file);
  const std::string from = "\"module_path\": \"LlamaModel.layers.", to = "\"module_path\": \"Model.blocks.";
  std::size_t replaced = 0;
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; ++replaced) text.replace(at, from.size(), to);
  DOCTEST_REQUIRE(replaced > 40);
  write_text(json_file, text);

  auto report = tracetorch::diff_traces(tiny() / "trace_st", renamed);
  DOCTEST_CHECK(!report.within_tolerance());
  DOCTEST_CHECK(report.only_in_reference.size() == replaced);
  DOCTEST_CHECK(report.only_in_candidate.size() == replaced);
  DOCTEST_CHECK(std::count(report.only_in_candidate.begin(), report.only_in_candidate.end(), "Model.blocks.2.mlp.up_proj") == 1);
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.0 inputs.args.0");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].status == tracetorch::DiffStatus::only_in_reference);

  tracetorch::DiffOptions options;
  options.renames.push_back(tracetorch::PathRename::parse(R"(^Model\.blocks\.(\d+)=>LlamaModel.layers.$1)"));
  report = tracetorch::diff_traces(tiny() / "trace_st", renamed, options);
  DOCTEST_INFO(report.text());
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.only_in_candidate.empty());

  DOCTEST_CHECK_THROWS_AS(tracetorch::PathRename::parse("no arrow"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(tracetorch::PathRename::parse("(unclosed=>x"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::PathRename::parse("(a)=>$2"), doctest::Contains("(a)=>$2"), tracetorch::Error);

  // RE2: Python's syntax (inline flags), `$&`, `$$`, and linear time on a path of 50,000
  // characters, where std::regex's recursion overflowed the stack.
  tracetorch::DiffOptions python_syntax;
  python_syntax.renames.push_back(tracetorch::PathRename::parse(R"((?i)^model\.BLOCKS\.(?P<n>\d+)=>LlamaModel.layers.$1)"));
  DOCTEST_CHECK(tracetorch::diff_traces(tiny() / "trace_st", renamed, python_syntax).within_tolerance());
  const auto apply = [](const tracetorch::PathRename& rename, std::string path) {
    re2::RE2::GlobalReplace(&path, *rename.compiled(), rename.rewrite());
    return path;
  };
  DOCTEST_CHECK(apply(tracetorch::PathRename::parse("b+=>[$&$$]"), "abba") == "a[bb$]a");
  const std::string long_path(50000, 'x');
  DOCTEST_CHECK(apply(tracetorch::PathRename::parse("(x|y)*z=>w"), long_path) == long_path);

#ifdef TRACETORCH_DIFF
  const auto result = run_diff((tiny() / "trace_st").string() + " " + renamed.string() +
                               R"( --map '^Model\.blocks\.=>LlamaModel.layers.')");
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
#endif
}

DOCTEST_TEST_CASE("calls are aligned by call order: the k-th call of a path meets the k-th") {
  TempDir dir;
  const auto trace = [&](const std::string& name, const std::vector<std::string>& calls, boost::json::value output = nullptr) {
    boost::json::array children;
    for (const auto& value : calls) {
      boost::json::object tensor{{"shape", "torch.Size([2])"}, {"dtype", "torch.float32"}, {"value", boost::json::array{value}}};
      boost::json::object inputs{{"args", boost::json::array{tensor}}};
      children.push_back(boost::json::object{{"module_path", "M.act"}, {"inputs", inputs}, {"outputs", output}});
    }
    fs::create_directories(dir / name);
    write_text(dir / name / "M_debug_tree_FULL_TENSORS.json",
               boost::json::serialize(boost::json::object{{"module_path", "M"}, {"inputs", boost::json::object{}},
                                                          {"children", children}}));
    return dir / name;
  };
  const auto ref = trace("ref", {"tensor([1.0000e+00, 2.0000e+00])", "tensor([3.0000e+00, 4.0000e+00])"});
  auto report = tracetorch::diff_traces(ref, trace("same", {"tensor([1.0000e+00, 2.0000e+00])", "tensor([3.0000e+00, 4.0001e+00])"}));
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());  // 4.0001 vs 4: within rtol 1e-4 plus the printed half units
  report = tracetorch::diff_traces(ref, trace("second", {"tensor([1.0000e+00, 2.0000e+00])", "tensor([3.0000e+00, 4.1000e+00])"}));
  DOCTEST_CHECK(first_divergence(report) == "M.act inputs.args.0 (call 2)");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].printed);
  report = tracetorch::diff_traces(ref, trace("three", {"tensor([1.0000e+00, 2.0000e+00])", "tensor([3.0000e+00, 4.0000e+00])",
                                                         "tensor([5.0000e+00, 6.0000e+00])"}));
  DOCTEST_CHECK((report.only_in_candidate == std::vector<std::string>{"M.act (call 3)"}));
  DOCTEST_CHECK(report.tensors.back().status == tracetorch::DiffStatus::only_in_candidate);
  // A non-tensor value that differs (null against 3) diverges too.
  report = tracetorch::diff_traces(ref, trace("value", {"tensor([1.0000e+00, 2.0000e+00])", "tensor([3.0000e+00, 4.0000e+00])"}, 3));
  DOCTEST_CHECK(first_divergence(report) == "M.act outputs");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].status == tracetorch::DiffStatus::value_mismatch);
}

DOCTEST_TEST_CASE("args.N on one side and kwargs.NAME on the other are aligned by position: a naming difference") {
  // The parse and the alignment need no file: traces from JSON text.
  const auto parse = [](const boost::json::object& root) {
    return tracetorch::detail::TraceParser("t.json").parse(boost::json::serialize(root));
  };
  const auto x = printed("1.0000e+00, 2.0000e+00");
  const auto mask = printed("0.0000e+00, 1.0000e+00");
  // Python passes everything by keyword; the port passes hidden_states positionally.
  const auto python = parse(node("M", {{"kwargs", {{"hidden_states", x}, {"mask", mask}}}}));
  const auto port = parse(node("M", {{"args", boost::json::array{x}}, {"kwargs", {{"mask", mask}}}}));
  DOCTEST_CHECK((python.calls[0].input_keys == std::vector<std::string>{"kwargs.hidden_states", "kwargs.mask"}));
  DOCTEST_CHECK((port.calls[0].input_keys == std::vector<std::string>{"args.0", "kwargs.mask"}));
  const auto same_name = [](std::string path) { return path; };
  auto alignment = tracetorch::detail::align_traces(python, port, same_name);
  DOCTEST_REQUIRE(alignment.values.size() == 2);
  DOCTEST_CHECK(alignment.values[0].diff.location == "inputs.kwargs.hidden_states");
  DOCTEST_CHECK(alignment.values[0].diff.candidate_location == "inputs.args.0");
  DOCTEST_CHECK(alignment.values[0].candidate != nullptr);
  DOCTEST_CHECK(!alignment.values[1].diff.naming_differs());
  // The other way round too, and tuples below the argument ("position_embeddings": (cos, sin)).
  const auto pair = boost::json::array{x, mask};
  alignment = tracetorch::detail::align_traces(parse(node("M", {{"args", boost::json::array{x, pair}}})),
                                               parse(node("M", {{"args", boost::json::array{x}}, {"kwargs", {{"pe", pair}}}})), same_name);
  DOCTEST_REQUIRE(alignment.values.size() == 3);
  DOCTEST_CHECK(alignment.values[2].diff.location == "inputs.args.1.1");
  DOCTEST_CHECK(alignment.values[2].diff.candidate_location == "inputs.kwargs.pe.1");

  // Not aligned where the order does not allow it: another position, or another structure.
  alignment = tracetorch::detail::align_traces(python, parse(node("M", {{"kwargs", {{"mask", mask}}}, {"args", boost::json::array{}}})), same_name);
  DOCTEST_CHECK(alignment.values[0].diff.status == tracetorch::DiffStatus::only_in_reference);
  alignment = tracetorch::detail::align_traces(
      python, parse(node("M", {{"args", boost::json::array{pair}}, {"kwargs", {{"mask", mask}}}})), same_name);
  DOCTEST_CHECK(alignment.values[0].diff.status == tracetorch::DiffStatus::only_in_reference);
  DOCTEST_CHECK(!alignment.values[0].diff.naming_differs());

  // Through diff_traces: compared, counted as a naming difference, not as two values on one side only.
  TempDir dir;
  const auto ref = write_trace(dir / "ref", node("M", {{"kwargs", {{"hidden_states", x}, {"mask", mask}}}}));
  const auto cand = write_trace(dir / "cand", node("M", {{"args", boost::json::array{printed("1.0000e+00, 2.5000e+00")}},
                                                        {"kwargs", {{"mask", mask}}}}));
  const auto report = tracetorch::diff_traces(ref, cand);
  const auto text = report.text(true);
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.counts().naming == 1);
  DOCTEST_CHECK(report.counts().values_only_in_reference == 0);
  DOCTEST_CHECK(report.counts().values_only_in_candidate == 0);
  DOCTEST_CHECK(first_divergence(report) == "M inputs.kwargs.hidden_states");  // its numbers are compared
  DOCTEST_CHECK(contains(text, "naming: values recorded positionally on one side and by keyword on the other, aligned by position: 1\n"));
  DOCTEST_CHECK(contains(text, "M inputs.kwargs.hidden_states: reference inputs.kwargs.hidden_states, candidate inputs.args.0"));
}

}  // DOCTEST_TEST_SUITE

}  // namespace diff_test
