// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp: how values are read and compared:
// the tolerance, errors and cosine of one tensor pair, printed numbers, the root's outputs read
// from their files, and malformed or unreadable input refused with the file named (exit 2).

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

#include <cmath>

// A named namespace around the file: its using-declarations stay apart from the `contains` and
// `write_trace` of other test files compiled with it (unity build).
namespace diff_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::copy_trace;
using tracetorch_test::first_divergence;
using tracetorch_test::planted;
using tracetorch_test::TempDir;
using tracetorch_test::tiny;
using tracetorch_test::write_small_trace;
using tracetorch_test::write_text;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

}  // namespace

DOCTEST_TEST_SUITE("diff") {

DOCTEST_TEST_CASE("malformed or unreadable input: exit 2 and the file named") {
  TempDir dir;
  const auto check_error = [](const fs::path& ref, const fs::path& cand, const std::string& needle) {
    std::string message;
    try {
      tracetorch::diff_traces(ref, cand);
    } catch (const tracetorch::Error& e) {
      message = e.what();
    }
    DOCTEST_INFO(message);
    DOCTEST_CHECK(message.find(needle) != std::string::npos);
  };
  const fs::path st = tiny() / "trace_st";
  check_error(st, dir / "missing", (dir / "missing").string() + ": no such file or directory");
  fs::create_directories(dir / "empty");
  check_error(st, dir / "empty", "no *_debug_tree_FULL_TENSORS.json");

  const auto json = dir / "bad" / "X_debug_tree_FULL_TENSORS.json";
  fs::create_directories(json.parent_path());
  write_text(json, "{\"module_path\": \"X\", \"inputs\": ");
  check_error(st, json, json.string() + ": not valid JSON");
  write_text(json, R"js({"module_path": "X", "inputs": {"args": [{"shape": "torch.Size([2])", "dtype": "torch.float32",
                     "value": "../../etc/passwd.safetensors"}]}})js");
  check_error(st, json.parent_path(), "is not a .safetensors file inside the trace directory");
  write_text(json, R"js({"module_path": "X", "inputs": {"args": [{"shape": "torch.Size([2, x])", "dtype": "torch.float32",
                     "value": "./a.safetensors"}]}})js");
  check_error(st, json, "shape torch.Size([2, x]) is not torch.Size");
  write_text(json, R"({"inputs": {}})");
  check_error(json, st, json.string() + ": the top level has no \"module_path\"");
  check_error(tiny() / "trace_repr" / "LlamaModel_debug_tree_SUMMARY.json", st, "a _SUMMARY.json has none");

  // A tensor file cut short, one that is not safetensors, one that holds another shape.
  const auto cut = copy_trace(tiny() / "trace_st", dir / "cut");
  const auto victim = cut / "LlamaModel.layers.1.mlp.up_proj_outputs.safetensors";
  fs::resize_file(victim, fs::file_size(victim) - 4);
  check_error(st, cut, victim.string() + ": ");
  write_text(victim, "not a safetensors file");
  check_error(st, cut, victim.string() + ": ");
  tracetorch::safetensors::save(victim, torch::zeros({3}));
  check_error(st, cut, victim.string() + ": holds shape [3] but");
  fs::remove(victim);
  check_error(st, cut, victim.string() + ": cannot open");

#ifdef TRACETORCH_DIFF
  auto result = run_diff(st.string() + " " + cut.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find(victim.string()) != std::string::npos);
  result = run_diff(st.string() + " " + json.string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find(json.string()) != std::string::npos);
  result = run_diff(st.string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(result.output.find("usage:") != std::string::npos);
  result = run_diff(st.string() + " " + st.string() + " --map 'no arrow'");
  DOCTEST_CHECK(result.exit_code == 2);
  result = run_diff(st.string() + " " + st.string() + " --atol -1");
  DOCTEST_CHECK(result.exit_code == 2);
#endif
}

DOCTEST_TEST_CASE("tolerance, errors and cosine of one tensor pair, and structural mismatches") {
  TempDir dir;
  const auto b = torch::tensor({1.0f, -2.0f, 0.0f, 4.0f});
  write_small_trace(dir / "ref", torch::ones({2}), b);
  // |a-b| = 1e-5, 3e-4, 2e-5, 0: with atol 1e-5 and rtol 1e-4 the tolerances are 1.1e-5, 2.1e-5, 1e-5, 4.1e-5.
  const auto a = torch::tensor({1.0f + 1e-5f, -2.0f + 3e-4f, 2e-5f, 4.0f});
  write_small_trace(dir / "cand", torch::ones({2}), a);
  auto report = tracetorch::diff_traces(dir / "ref", dir / "cand");
  DOCTEST_REQUIRE(report.tensors.size() == 2);
  DOCTEST_CHECK(first_divergence(report) == "M.leaf outputs");
  const auto& t = report.tensors[1];
  DOCTEST_CHECK(t.out_of_tolerance == 2);  // -2 and 0
  DOCTEST_CHECK(t.compared == 4);
  const double expected_abs = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  DOCTEST_CHECK(t.max_abs_error == doctest::Approx(expected_abs));
  DOCTEST_CHECK(std::isinf(t.max_rel_error));  // 2e-5 against 0
  const double cosine =
      torch::cosine_similarity(a.to(torch::kDouble), b.to(torch::kDouble), 0).item<double>();
  DOCTEST_CHECK(t.cosine_similarity == doctest::Approx(cosine));
  // Looser tolerances accept it.
  report = tracetorch::diff_traces(dir / "ref", dir / "cand", {.atol = 1e-4, .rtol = 2e-4});
  DOCTEST_CHECK(report.within_tolerance());

  // Shape and dtype mismatches, and NaN/inf handling (NaN matches NaN, inf matches inf).
  write_small_trace(dir / "shape", torch::ones({3}), b);
  report = tracetorch::diff_traces(dir / "ref", dir / "shape");
  DOCTEST_CHECK(report.tensors[0].status == tracetorch::DiffStatus::shape_mismatch);
  DOCTEST_CHECK(first_divergence(report) == "M.leaf inputs.args.0");
  write_small_trace(dir / "dtype", torch::ones({2}, torch::kDouble), b);
  report = tracetorch::diff_traces(dir / "ref", dir / "dtype");
  DOCTEST_CHECK(report.tensors[0].status == tracetorch::DiffStatus::dtype_mismatch);
  const auto special = torch::tensor({NAN, INFINITY, -INFINITY, 1.0f});
  write_small_trace(dir / "nan_ref", torch::ones({2}), special);
  write_small_trace(dir / "nan_cand", torch::ones({2}), special.clone());
  DOCTEST_CHECK(tracetorch::diff_traces(dir / "nan_ref", dir / "nan_cand").within_tolerance());
  write_small_trace(dir / "nan_other", torch::ones({2}), torch::tensor({1.0f, INFINITY, -INFINITY, 1.0f}));
  report = tracetorch::diff_traces(dir / "nan_ref", dir / "nan_other");
  DOCTEST_CHECK(report.tensors[1].out_of_tolerance == 1);
  DOCTEST_CHECK(report.json()["tensors"].as_array()[1].at("max_abs_error") == "nan");

  // A module on one side only.
  write_small_trace(dir / "other_root", torch::ones({2}), b, "N");
  report = tracetorch::diff_traces(dir / "ref", dir / "other_root");
  DOCTEST_CHECK((report.only_in_reference == std::vector<std::string>{"M", "M.leaf"}));
  DOCTEST_CHECK((report.only_in_candidate == std::vector<std::string>{"N", "N.leaf"}));
}

DOCTEST_TEST_CASE("printed numbers: values, their precision, and the keyword suffix") {
  std::vector<tracetorch::detail::PrintedNumber> n;
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers(
      {"tensor([[-1.2345e-01,  2.0000e+00,  ...,  inf],", "        [ nan, -inf,  3.5000e+03,  1.0000e-05]], dtype=torch.float64)"}, n));
  DOCTEST_REQUIRE(n.size() == 7);
  DOCTEST_CHECK(n[0].value == doctest::Approx(-0.12345));
  DOCTEST_CHECK(n[0].half_unit == doctest::Approx(0.5e-5));
  DOCTEST_CHECK(std::isinf(n[2].value));
  DOCTEST_CHECK(std::isnan(n[3].value));
  DOCTEST_CHECK(n[5].value == 3500.0);
  DOCTEST_CHECK(n[5].half_unit == doctest::Approx(0.05));
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers({"tensor([[1, 2],", "        [3, 4]])"}, n));
  DOCTEST_CHECK(n.size() == 4);
  DOCTEST_CHECK(n[3].half_unit == 0);
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers({"tensor([ True, False])"}, n));
  DOCTEST_CHECK((n.size() == 2 && n[0].value == 1 && n[1].value == 0));
  DOCTEST_REQUIRE(tracetorch::detail::parse_printed_numbers({"tensor([], size=(0, 3))"}, n));
  DOCTEST_CHECK(n.empty());
  DOCTEST_CHECK(!tracetorch::detail::parse_printed_numbers({"array([1, 2])"}, n));
  DOCTEST_CHECK(!tracetorch::detail::parse_printed_numbers({"tensor([1.0e+])"}, n));
}

DOCTEST_TEST_CASE("the root's outputs are compared from their files, which the debugger leaves out of the JSON") {
  TempDir dir;
  write_small_trace(dir / "ref", torch::ones({2}), torch::ones({3}));
  write_small_trace(dir / "cand", torch::ones({2}), torch::ones({3}));
  tracetorch::safetensors::save(dir / "ref" / "M_outputs_0.safetensors", torch::tensor({1.0f, 2.0f}));
  tracetorch::safetensors::save(dir / "cand" / "M_outputs_0.safetensors", torch::tensor({1.0f, 2.5f}));
  auto report = tracetorch::diff_traces(dir / "ref", dir / "cand");
  DOCTEST_INFO(report.text(true));
  DOCTEST_REQUIRE(report.tensors.size() == 3);
  DOCTEST_CHECK(first_divergence(report) == "M outputs.0");
  const auto& root = report.tensors.back();
  DOCTEST_CHECK(root.from_file);
  DOCTEST_CHECK(root.status == tracetorch::DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(root.max_abs_error == doctest::Approx(0.5));
  // Missing on one side: a value only in the reference, not silently skipped.
  fs::remove(dir / "cand" / "M_outputs_0.safetensors");
  report = tracetorch::diff_traces(dir / "ref", dir / "cand");
  DOCTEST_CHECK(report.tensors.back().status == tracetorch::DiffStatus::only_in_reference);
  DOCTEST_CHECK(report.counts().values_only_in_reference == 1);

  // The fixture: the model's own output (last_hidden_state) is compared, and diverges with a planted bug.
  report = tracetorch::diff_traces(tiny() / "trace_st", planted("eps_layer2"));
  const auto last = std::find_if(report.tensors.begin(), report.tensors.end(),
                                 [](const tracetorch::TensorDiff& t) { return t.where() == "LlamaModel outputs.last_hidden_state"; });
  DOCTEST_REQUIRE(last != report.tensors.end());
  DOCTEST_CHECK(last->status == tracetorch::DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(last->reference_shape == "[2, 7, 64]");
  // A printed trace has lost them: said, not reported as missing.
  report = tracetorch::diff_traces(tiny() / "trace_repr", tiny() / "trace_st");
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_REQUIRE(report.notes.size() == 1);
  DOCTEST_CHECK(contains(report.notes[0], "the root's outputs are not compared: the reference trace holds printed values"));
}

}  // DOCTEST_TEST_SUITE

}  // namespace diff_test
