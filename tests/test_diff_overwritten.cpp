// include/tracetorch/diff.hpp (detail/trace_format/overwritten_files.hpp) and tools/tracetorch_diff.cpp:
// a use_repr=false trace whose repeated calls share one file per module path, as transformers'
// debugger writes it (issue 34): the call the file holds is compared, the others are counted as
// overwritten, reported, and do not fail; another call's numbers are never compared.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace diff_overwritten_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::copy_trace;
using tracetorch_test::first_divergence;
using tracetorch_test::read_json;
using tracetorch_test::TempDir;
using tracetorch_test::write_text;

/// Python's repr of a 0-d float tensor: "tensor(3.3728e-02)".
std::string statistic(const torch::Tensor& value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "tensor(%.4e)", value.item<double>());
  return buffer;
}

/// A tensor's record as the debugger writes it with use_repr=false.
boost::json::object record(const torch::Tensor& t, const std::string& stem) {
  return {{"shape", tracetorch::python_shape_repr(t.sizes())}, {"dtype", tracetorch::python_dtype_repr(t.scalar_type())},
          {"value", "./" + stem + ".safetensors"}, {"mean", statistic(t.mean())}, {"std", statistic(t.std())},
          {"min", statistic(t.min())}, {"max", statistic(t.max())}};
}

/// M calling M.f once per input (its output is `outputs[k]`). With `python_names`, transformers'
/// file names (one per module path) and only call `holder`'s tensors in the files (1-based; 0:
/// the last call's, as its debugger leaves them); else tracetorch's (`_call<N>`, each its own).
fs::path write_repeated(const fs::path& dir, const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& outputs,
                        bool python_names, std::size_t holder = 0) {
  fs::create_directories(dir);
  if (holder == 0) holder = inputs.size();
  boost::json::array children;
  for (std::size_t k = 1; k <= inputs.size(); ++k) {
    const std::string stem = python_names || k == 1 ? "M.f" : "M.f_call" + std::to_string(k);
    children.push_back(tracetorch_test::node("M.f", {{"args", boost::json::array{record(inputs[k - 1], stem + "_inputs_args_0")}}},
                                             record(outputs[k - 1], stem + "_outputs")));
    if (python_names && k != holder) continue;
    tracetorch::safetensors::save(dir / (stem + "_inputs_args_0.safetensors"), inputs[k - 1]);
    tracetorch::safetensors::save(dir / (stem + "_outputs.safetensors"), outputs[k - 1]);
  }
  return tracetorch_test::write_trace(dir, tracetorch_test::node("M", {{"args", boost::json::array{}}}, nullptr, children));
}

std::vector<torch::Tensor> doubled(const std::vector<torch::Tensor>& xs) {
  std::vector<torch::Tensor> out;
  for (const auto& x : xs) out.push_back(x * 2);
  return out;
}

std::size_t overwritten_values(const tracetorch::DiffReport& report) {
  return static_cast<std::size_t>(std::count_if(report.tensors.begin(), report.tensors.end(), [](const tracetorch::TensorDiff& t) {
    return t.status == tracetorch::DiffStatus::overwritten;
  }));
}

}  // namespace

DOCTEST_TEST_SUITE("diff overwritten") {

DOCTEST_TEST_CASE("a Python trace whose repeated calls share one file: the call it holds is compared, the others overwritten") {
  TempDir dir;
  torch::manual_seed(3);
  // Three calls of different shapes, as an MoE block's experts.act_fn gets one per expert.
  const std::vector<torch::Tensor> xs{torch::randn({3, 4}), torch::randn({2, 4}), torch::randn({5, 4})};
  const auto ref = write_repeated(dir / "python", xs, doubled(xs), true);
  const auto cand = write_repeated(dir / "port", xs, doubled(xs), false);
  auto report = tracetorch::diff_traces(ref, cand);
  auto text = report.text(true);
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  const auto n = report.counts();
  DOCTEST_CHECK(n.overwritten_in_reference == 4);  // calls 1 and 2: input and output
  DOCTEST_CHECK(n.overwritten_in_candidate == 0);
  DOCTEST_CHECK(n.total() == 0);
  for (const auto& t : report.tensors) {
    DOCTEST_INFO(t.where());
    DOCTEST_CHECK((t.status == tracetorch::DiffStatus::overwritten) == (t.call < 3 && t.module_path == "M.f"));
    if (t.call == 3) DOCTEST_CHECK(t.compared > 0);  // the call the files hold: its numbers compared
    if (t.status == tracetorch::DiffStatus::overwritten) DOCTEST_CHECK(t.reference_file_holds_call == 3);
  }
  DOCTEST_CHECK(contains(text, "overwritten: values not compared, their file holding a later call's value (transformers' debugger "
                               "keeps one file per module path): in the reference 4, in the candidate 0\n"));
  DOCTEST_CHECK(contains(text, "  M.f inputs.args.0: the reference's file holds call 3's value\n"));
  DOCTEST_CHECK(contains(text, "  M.f outputs (call 2): overwritten, reference [2, 4] torch.float32, candidate [2, 4] torch.float32, "
                               "the reference's file holds call 3's value (not compared)\n"));
  const auto json = report.json();
  DOCTEST_CHECK(json.at("differences").at("overwritten_in_reference").to_number<int>() == 4);
  DOCTEST_CHECK(json.at("tensors").as_array()[0].at("reference_file_holds_call").to_number<int>() == 3);
  DOCTEST_CHECK(json.at("tensors").as_array()[0].at("candidate_file_holds_call").is_null());
  DOCTEST_CHECK(json.at("tensors").as_array()[0].at("status") == "overwritten");

  // Both sides so: overwritten in both, still no difference.
  report = tracetorch::diff_traces(ref, ref);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK((report.counts().overwritten_in_reference == 4 && report.counts().overwritten_in_candidate == 4));

  // A port wrong in the call the file holds fails; wrong only where the file cannot tell, it cannot fail.
  const auto wrong_last = write_repeated(dir / "wrong_last", xs, {xs[0] * 2, xs[1] * 2, xs[2] * 3}, false);
  report = tracetorch::diff_traces(ref, wrong_last);
  DOCTEST_CHECK(first_divergence(report) == "M.f outputs (call 3)");
  DOCTEST_CHECK(report.counts().not_accepted == 1);
  const auto wrong_first = write_repeated(dir / "wrong_first", xs, {xs[0] * 3, xs[1] * 2, xs[2] * 2}, false);
  report = tracetorch::diff_traces(ref, wrong_first);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(overwritten_values(report) == 4);
  // The JSON's own records of an overwritten call still count: another shape is a difference.
  const auto wrong_shape = write_repeated(dir / "wrong_shape", {torch::randn({4, 4}), xs[1], xs[2]},
                                          {torch::randn({4, 4}), xs[1] * 2, xs[2] * 2}, false);
  report = tracetorch::diff_traces(ref, wrong_shape);
  DOCTEST_CHECK(first_divergence(report) == "M.f inputs.args.0");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].status == tracetorch::DiffStatus::shape_mismatch);

#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_diff(ref.string() + " " + cand.string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "in the reference 4, in the candidate 0"));
  result = tracetorch_test::run_diff(ref.string() + " " + wrong_last.string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "first divergence: M.f outputs (call 3)\n"));
#endif
}

DOCTEST_TEST_CASE("where the calls' shapes agree, the file's statistics tell which call it holds; a file no call fits is refused") {
  TempDir dir;
  torch::manual_seed(4);
  const std::vector<torch::Tensor> xs{torch::randn({2, 4}), torch::randn({2, 4}), torch::randn({2, 4})};
  // A writer that left call 2's tensors in the files: call 2 is compared, not call 3.
  const auto ref = write_repeated(dir / "python", xs, doubled(xs), true, 2);
  const auto cand = write_repeated(dir / "port", xs, doubled(xs), false);
  auto report = tracetorch::diff_traces(ref, cand);
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.counts().overwritten_in_reference == 4);
  for (const auto& t : report.tensors) {
    if (t.module_path != "M.f") continue;
    DOCTEST_CHECK((t.status == tracetorch::DiffStatus::overwritten) == (t.call != 2));
    if (t.call != 2) DOCTEST_CHECK(t.reference_file_holds_call == 2);
  }
  const auto wrong_second = write_repeated(dir / "wrong", xs, {xs[0] * 2, xs[1] * 3, xs[2] * 2}, false);
  DOCTEST_CHECK(first_divergence(tracetorch::diff_traces(ref, wrong_second)) == "M.f outputs (call 2)");

  // A shared file whose tensor no call recorded: malformed, named.
  tracetorch::safetensors::save(ref / "M.f_outputs.safetensors", torch::zeros({7, 7}));
  std::string message;
  try {
    tracetorch::diff_traces(ref, cand);
  } catch (const tracetorch::Error& e) {
    message = e.what();
  }
  DOCTEST_CHECK(contains(message, (ref / "M.f_outputs.safetensors").string() +
                                      ": holds shape [7, 7] torch.float32, which none of the 3 values of "));
}

DOCTEST_TEST_CASE("Qwen2-MoE's Python trace (experts.act_fn once per expert): read, compared, the overwritten calls reported") {
  TempDir dir;
  const auto python = tracetorch_test::data_dir() / "diff" / "qwen2moe_st";
  auto report = tracetorch::diff_traces(python, python);
  auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  // Two MoE layers, four expert calls each: three overwritten calls of two values, on each side.
  DOCTEST_CHECK(report.counts().overwritten_in_reference == 12);
  DOCTEST_CHECK(report.counts().overwritten_in_candidate == 12);
  DOCTEST_CHECK(contains(text, "  Qwen2MoeModel.layers.0.mlp.experts.act_fn inputs.args.0: the reference's file holds call 4's value, "
                               "the candidate's file holds call 4's value\n"));

  // The last expert call's output changed in the candidate: that call diverges, nothing else.
  const auto cand = copy_trace(python, dir / "cand");
  const auto file = cand / "Qwen2MoeModel.layers.0.mlp.experts.act_fn_outputs.safetensors";
  tracetorch::safetensors::save(file, tracetorch::safetensors::load_single(file) + 1);
  report = tracetorch::diff_traces(python, cand);
  DOCTEST_CHECK(first_divergence(report) == "Qwen2MoeModel.layers.0.mlp.experts.act_fn outputs (call 4)");
#ifdef TRACETORCH_DIFF
  auto result = tracetorch_test::run_diff(python.string() + " " + python.string());
  DOCTEST_CHECK(result.exit_code == 0);
  result = tracetorch_test::run_diff(python.string() + " " + cand.string());
  DOCTEST_CHECK(result.exit_code == 1);
#endif
}

}  // DOCTEST_TEST_SUITE

}  // namespace diff_overwritten_test
