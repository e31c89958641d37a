// include/tracetorch/diff.hpp (detail/diff/execution_order.hpp) and tools/tracetorch_diff.cpp:
// execution order. Calls that ran in another order among their siblings are DiffKind::order
// (issue 34: g++ evaluates `down_proj(act_fn(gate_proj(x)) * up_proj(x))` right to left); a
// value recorded on one side only lies with its call's inputs or outputs, so the first
// divergence is the first in execution order (issue 39); the note on the root's outputs.

#include <doctest/doctest.h>

#include <tracetorch/debugger.hpp>
#include <tracetorch/diff.hpp>
#include <tracetorch/module.hpp>
#include <tracetorch/nn.hpp>

#include "diff_helpers.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace diff_order_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::copy_trace;
using tracetorch_test::first_divergence;
using tracetorch_test::read_json;
using tracetorch_test::TempDir;
using tracetorch_test::tiny;
using tracetorch_test::write_text;

/// A gated MLP as a port writes it, with its calls sequenced (gate_proj first, as Python's
/// left-to-right evaluation runs them) or in one unsequenced expression.
struct GatedMlpImpl : torch::nn::Module {
  GatedMlpImpl() {
    gate_proj = register_module("gate_proj", tracetorch::nn::Linear(4, 8));
    up_proj = register_module("up_proj", tracetorch::nn::Linear(4, 8));
    down_proj = register_module("down_proj", tracetorch::nn::Linear(8, 4));
    act_fn = register_module("act_fn", tracetorch::nn::SiLU());
  }
  torch::Tensor forward(torch::Tensor x) {
    if (unsequenced) return down_proj(act_fn(gate_proj(x)) * up_proj(x));  // the C++ trap: operands in any order
    auto gate = act_fn(gate_proj(x));
    auto up = up_proj(x);
    return down_proj(gate * up);
  }
  tracetorch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  tracetorch::nn::SiLU act_fn{nullptr};
  bool unsequenced = false;
};
TRACETORCH_TRACEABLE_IMPL(GatedMlp, GatedMlpImpl);

/// The model's trace (use_repr=false) into `dir`.
fs::path trace_mlp(GatedMlp& model, const torch::Tensor& x, const fs::path& dir) {
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .use_repr = false});
  model(x);
  return dir;
}

/// The module paths of the root's children, in the trace's order.
std::vector<std::string> child_paths(const fs::path& dir, const std::string& root) {
  std::vector<std::string> out;
  const auto json = read_json(dir / (root + "_debug_tree_FULL_TENSORS.json"));
  for (const auto& child : json.at("children").as_array()) out.emplace_back(child.at("module_path").as_string());
  return out;
}

/// The tiny Llama's Python trace with one node edited by `edit` (the JSON only: files unchanged).
template <class Edit>
fs::path edited_llama(const fs::path& to, Edit edit) {
  copy_trace(tiny() / "trace_st", to);
  const auto file = to / "LlamaModel_debug_tree_FULL_TENSORS.json";
  auto json = read_json(file);
  edit(json.as_object());
  write_text(file, boost::json::serialize(json));
  return to;
}

/// The child of `node` whose module path ends with `suffix`.
boost::json::object& child(boost::json::object& node, const std::string& suffix) {
  for (auto& c : node.at("children").as_array()) {
    if (std::string(c.at("module_path").as_string()).ends_with(suffix)) return c.as_object();
  }
  throw std::runtime_error("no child " + suffix);
}

}  // namespace

DOCTEST_TEST_SUITE("diff order") {

#ifdef TRACETORCH_DIFF
DOCTEST_TEST_CASE("an unsequenced gated MLP: the calls out of order are reported, exit 1; accepted by a rule, exit 0") {
  TempDir dir;
  torch::manual_seed(0);
  GatedMlp model;
  const auto x = torch::randn({2, 4});
  const auto ref = trace_mlp(model, x, dir / "sequenced");
  model->unsequenced = true;
  const auto cand = trace_mlp(model, x, dir / "unsequenced");
  // What g++ made of the unsequenced expression: up_proj ran first (the trap this test is about).
  DOCTEST_REQUIRE(child_paths(ref, "GatedMlp") ==
                  std::vector<std::string>{"GatedMlp.gate_proj", "GatedMlp.act_fn", "GatedMlp.up_proj", "GatedMlp.down_proj"});
  DOCTEST_REQUIRE_MESSAGE(child_paths(cand, "GatedMlp").front() == "GatedMlp.up_proj", "this compiler ran gate_proj first");

  auto result = tracetorch_test::run_diff(ref.string() + " " + cand.string() + " --json " + (dir / "report.json").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  // Every value agrees: the order alone fails the verdict, shown both ways.
  DOCTEST_CHECK(contains(result.output, "first divergence: GatedMlp.up_proj\n  order differs: among the calls of GatedMlp, "
                                        "reference gate_proj, act_fn, up_proj, down_proj; candidate up_proj, gate_proj, act_fn, down_proj\n"));
  DOCTEST_CHECK(contains(result.output, "dtype 0, calls out of order 1; "));
  DOCTEST_CHECK(contains(result.output, "verdict: differences 1, accepted 0, not accepted 1: diverges"));
  const auto json = read_json(dir / "report.json");
  DOCTEST_CHECK(json.at("differences").at("by_kind").at("order").to_number<int>() == 1);
  DOCTEST_CHECK(json.at("differences").at("by_kind").at("values").to_number<int>() == 0);
  const auto& first = json.at("first_divergence");
  DOCTEST_CHECK(first.at("module_path") == "GatedMlp.up_proj");
  DOCTEST_CHECK(first.at("kind") == "order");
  DOCTEST_CHECK(first.at("candidate_order") == boost::json::array{"up_proj", "gate_proj", "act_fn", "down_proj"});
  DOCTEST_CHECK(first.at("reference_order") == boost::json::array{"gate_proj", "act_fn", "up_proj", "down_proj"});

  write_text(dir / "rules.txt", "GatedMlp.up_proj order its operands are independent; reviewed\n");
  result = tracetorch_test::run_diff(ref.string() + " " + cand.string() + " --accept " + (dir / "rules.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "verdict: differences 1, accepted 1, not accepted 0: within tolerance"));
  DOCTEST_CHECK(contains(result.output, "rules.txt:1 GatedMlp.up_proj order (1): its operands are independent; reviewed"));
  // An order rule names a call, not a value.
  write_text(dir / "rules.txt", "GatedMlp.up_proj:outputs order no\n");
  result = tracetorch_test::run_diff(ref.string() + " " + cand.string() + " --accept " + (dir / "rules.txt").string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, "rules.txt:1: an order rule names a module, not a value"));
}
#endif

DOCTEST_TEST_CASE("order in the Llama fixture: a moved sibling call is found in its layer; values in another order in one call are not") {
  TempDir dir;
  // layers.1's MLP as the unsequenced port runs it: up_proj before gate_proj.
  const auto moved = edited_llama(dir / "moved", [](boost::json::object& root) {
    auto& children = child(child(root, ".layers.1"), ".mlp").at("children").as_array();
    boost::json::value up = children[2];
    children.erase(children.begin() + 2);
    children.insert(children.begin(), std::move(up));
  });
  auto report = tracetorch::diff_traces(tiny() / "trace_st", moved);
  DOCTEST_INFO(report.text());
  DOCTEST_CHECK(report.counts().of(tracetorch::DiffKind::order) == 1);
  DOCTEST_CHECK(report.counts().not_accepted == 1);
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.1.mlp.up_proj");
  const auto& t = report.tensors[*report.first_divergence];
  DOCTEST_CHECK(t.order_parent == "LlamaModel.layers.1.mlp");
  // Placed where the orders part, at gate_proj's start: after the MLP's input, before gate_proj's.
  const auto at = static_cast<std::size_t>(*report.first_divergence);
  DOCTEST_CHECK(report.tensors[at - 1].where() == "LlamaModel.layers.1.mlp inputs.args.0");
  DOCTEST_CHECK(report.tensors[at + 1].where() == "LlamaModel.layers.1.mlp.gate_proj inputs.args.0");
  // The modules table says why.
  bool noted = false;
  for (const auto& m : report.modules()) noted |= m.module_path == "LlamaModel.layers.1.mlp.up_proj" && m.note() == "call out of order";
  DOCTEST_CHECK(noted);

  // A call's keywords recorded in another order are the same call: no difference.
  const auto keywords = edited_llama(dir / "keywords", [](boost::json::object& root) {
    auto& kwargs = child(root, ".layers.0").at("inputs").at("kwargs").as_object();
    boost::json::object reversed;
    std::vector<std::string> keys;
    for (const auto& entry : kwargs) keys.emplace_back(entry.key());
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) reversed[*k] = kwargs.at(*k);
    kwargs = std::move(reversed);
  });
  report = tracetorch::diff_traces(tiny() / "trace_st", keywords);
  DOCTEST_INFO(report.text());
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.counts().total() == 0);
}

DOCTEST_TEST_CASE("a value recorded on one side only is ordered with its call's inputs: a root keyword is the first divergence") {
  TempDir dir;
  // A default call against one that passes use_cache (and so hands its layers no cache).
  const auto cand = edited_llama(dir / "no_cache", [](boost::json::object& root) {
    root.at("inputs").as_object()["kwargs"].as_object()["use_cache"] = "False";
    child(root, ".layers.0").at("inputs").at("kwargs").as_object()["past_key_values"] = "None";
  });
  const auto report = tracetorch::diff_traces(tiny() / "trace_st", cand);
  DOCTEST_INFO(report.text());
  DOCTEST_CHECK(report.counts().not_accepted == 2);
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel inputs.kwargs.use_cache");
  DOCTEST_CHECK(report.tensors[*report.first_divergence].status == tracetorch::DiffStatus::only_in_candidate);
  DOCTEST_CHECK(contains(report.text(), "first divergence: LlamaModel inputs.kwargs.use_cache\n  only in candidate\n"));
  DOCTEST_CHECK(report.json().at("first_divergence").at("location") == "inputs.kwargs.use_cache");
  // It lies right after the root's input_ids, before the first module call's values.
  DOCTEST_CHECK(*report.first_divergence == 1);
  DOCTEST_CHECK(report.tensors[0].where() == "LlamaModel inputs.kwargs.input_ids");
}

DOCTEST_TEST_CASE("the root's outputs not compared are said so, in text and JSON, whichever traces hide them") {
  // Both printed: the root made calls, so neither JSON holds its outputs, and there are no files.
  auto report = tracetorch::diff_traces(tiny() / "trace_repr", tiny() / "trace_repr");
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_REQUIRE(report.notes.size() == 1);
  DOCTEST_CHECK(contains(report.notes[0], "the root's outputs are not compared: neither trace records them"));
  DOCTEST_CHECK(contains(report.text(), "note: the root's outputs are not compared: neither trace records them"));
  DOCTEST_CHECK(report.json().at("notes").as_array().size() == 1);
  DOCTEST_CHECK(contains(std::string(report.json().at("notes").as_array()[0].as_string()), "neither trace records them"));
  // One side printed: the other note, once.
  report = tracetorch::diff_traces(tiny() / "trace_st", tiny() / "trace_repr");
  DOCTEST_REQUIRE(report.notes.size() == 1);
  DOCTEST_CHECK(contains(report.notes[0], "the candidate trace holds printed values"));
  // Both with files: compared, no note.
  report = tracetorch::diff_traces(tiny() / "trace_st", tiny() / "trace_st");
  DOCTEST_CHECK(report.notes.empty());
  DOCTEST_CHECK(std::any_of(report.tensors.begin(), report.tensors.end(), [](const tracetorch::TensorDiff& t) { return t.from_file; }));
}

}  // DOCTEST_TEST_SUITE

}  // namespace diff_order_test
