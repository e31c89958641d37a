// include/tracetorch/diff/arg_names.hpp through include/tracetorch/diff.hpp and
// tools/tracetorch_diff.cpp (--arg-names): a value recorded as args.N on one side and
// kwargs.NAME on the other, aligned by a rule where the recorded order does not align it or
// aligns it wrongly, compared, and reported as a naming difference. Hand-made traces of printed
// values (no tensor file), and the two Llama fixtures of the two call conventions.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"

#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using tracetorch_test::TempDir;

using tracetorch_test::contains;
using tracetorch_test::first_divergence;
using tracetorch_test::printed;
using tracetorch_test::write_text;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

const boost::json::object kHidden = printed("1.0000e+00, 2.0000e+00");
const boost::json::object kMask = printed("0.0000e+00, -1.0000e+00");
const boost::json::object kCos = printed("5.0000e-01, 2.5000e-01");
const boost::json::object kSin = printed("7.5000e-01, 1.2500e-01");

/// A trace "M" whose one child M.attn records `inputs` and returns `kHidden`, written into `dir`.
fs::path write_attn_trace(const fs::path& dir, boost::json::object inputs) {
  boost::json::object attn{{"module_path", "M.attn"}, {"inputs", std::move(inputs)}, {"outputs", kHidden}};
  boost::json::object root{{"module_path", "M"}, {"inputs", {{"args", boost::json::array{}}}}, {"children", boost::json::array{attn}}};
  fs::create_directories(dir);
  write_text(dir / "M_debug_tree_FULL_TENSORS.json", boost::json::serialize(root));
  return dir;
}

/// Python's call: attn(position_embeddings=(cos, sin), hidden_states=h), keywords in another order than forward's.
boost::json::object python_inputs(const boost::json::object& hidden = kHidden) {
  return {{"kwargs", {{"position_embeddings", boost::json::array{kCos, kSin}}, {"hidden_states", hidden}}}};
}

/// The port's call: attn(h, (cos, sin)).
boost::json::object port_inputs(const boost::json::object& hidden = kHidden) {
  return {{"args", boost::json::array{hidden, boost::json::array{kCos, kSin}}}};
}


std::string refusal(const std::string& text) {
  try {
    tracetorch::parse_arg_names_rules(text, "names.txt");
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  return "accepted";
}


}  // namespace

DOCTEST_TEST_SUITE("diff naming") {

DOCTEST_TEST_CASE("argument-name rules: parsed with file and line, malformed lines refused with file:line") {
  const auto rules = tracetorch::parse_arg_names_rules(
      "# MODULE  NAMES\n"
      "\n"
      "  M.layers.*.attn\thidden_states,position_embeddings,attention_mask  \r\n"
      "M.mlp x\n",
      "names.txt");
  DOCTEST_REQUIRE(rules.size() == 2);
  DOCTEST_CHECK(rules[0].origin() == "names.txt:3");
  DOCTEST_CHECK(rules[0].module_pattern == "M.layers.*.attn");
  DOCTEST_CHECK((rules[0].names == std::vector<std::string>{"hidden_states", "position_embeddings", "attention_mask"}));
  DOCTEST_CHECK(rules[0].names_text() == "hidden_states,position_embeddings,attention_mask");
  DOCTEST_CHECK((rules[1].line == 4 && rules[1].names == std::vector<std::string>{"x"}));

  DOCTEST_CHECK(contains(refusal("# ok\nM.attn\n"), "names.txt:2: expected MODULE NAME,NAME,... (no spaces in the list), got \"M.attn\""));
  DOCTEST_CHECK(contains(refusal("M.attn hidden_states, mask\n"), "names.txt:1: expected MODULE NAME,NAME,..."));
  DOCTEST_CHECK(contains(refusal("M.attn:inputs.args.0 x\n"), "names.txt:1: pattern \"M.attn:inputs.args.0\" is a MODULE, not MODULE:VALUE"));
  DOCTEST_CHECK(contains(refusal("M.attn a,,b\n"), "names.txt:1: an empty name in \"a,,b\""));
  DOCTEST_CHECK(contains(refusal("M.attn a,\n"), "names.txt:1: an empty name"));
  DOCTEST_CHECK(contains(refusal("M.attn a,b,a\n"), "names.txt:1: \"a\" is named twice"));
  DOCTEST_CHECK(contains(refusal("M.attn 1x\n"), "names.txt:1: \"1x\" is not a Python identifier"));
  DOCTEST_CHECK(contains(refusal("M.attn x-y\n"), "names.txt:1: \"x-y\" is not a Python identifier"));
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::load_arg_names_rules("/nonexistent/names.txt"),
                               doctest::Contains("/nonexistent/names.txt: cannot open"), tracetorch::Error);
}

DOCTEST_TEST_CASE("--arg-names: keywords recorded in another order than the positions are aligned by the rule and compared") {
  TempDir dir;
  const auto python = write_attn_trace(dir / "python", python_inputs());
  const auto port = write_attn_trace(dir / "port", port_inputs());
  // By recorded order a tuple meets a tensor at each position: nothing aligns, six values on one side only.
  auto report = tracetorch::diff_traces(python, port);
  DOCTEST_CHECK(report.counts().values_only_in_reference == 3);
  DOCTEST_CHECK(report.counts().values_only_in_candidate == 3);
  DOCTEST_CHECK(report.counts().naming == 0);

  tracetorch::DiffOptions options;
  options.arg_names = tracetorch::parse_arg_names_rules("M.* hidden_states,position_embeddings\n", "names.txt");
  report = tracetorch::diff_traces(python, port, options);
  const auto text = report.text(true);
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  const auto n = report.counts();
  DOCTEST_CHECK((n.naming == 3 && n.naming_by_rule == 3 && n.rule_over_order == 0));
  DOCTEST_CHECK((n.values_only_in_reference == 0 && n.values_only_in_candidate == 0 && n.tensors == 4));
  for (std::size_t i = 0; i < 3; ++i) DOCTEST_CHECK(report.tensors[i].compared == 2);  // the numbers were compared
  DOCTEST_CHECK((report.arg_names.at(0).calls == 1 && report.arg_names[0].matched == 3));
  DOCTEST_CHECK(options.arg_names[0].matched == 0);  // the options' rules are not written to
  DOCTEST_CHECK(contains(text, "naming: values recorded positionally on one side and by keyword on the other, "
                               "aligned by position: 0, by rule: 3\n"));
  DOCTEST_CHECK(contains(text, "  M.attn inputs.kwargs.position_embeddings.1: reference inputs.kwargs.position_embeddings.1, "
                               "candidate inputs.args.1.1 (rule names.txt:1)\n"));
  DOCTEST_CHECK(contains(text, "naming rule: names.txt:1 M.* hidden_states,position_embeddings: decided 3 values in 1 calls\n"));
  DOCTEST_CHECK(contains(text, "verdict: differences 0, accepted 0, not accepted 0: within tolerance"));
  DOCTEST_CHECK(!contains(text, "stale naming rule"));

#ifdef TRACETORCH_DIFF
  write_text(dir / "names.txt", "# the port's forward(hidden_states, position_embeddings)\nM.attn hidden_states,position_embeddings\n");
  const std::string names = (dir / "names.txt").string();
  auto result = run_diff(python.string() + " " + port.string());
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "values only in reference 3, only in candidate 3"));
  result = run_diff(python.string() + " " + port.string() + " --arg-names " + names + " --json " + (dir / "report.json").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "aligned by position: 0, by rule: 3"));
  const auto json = tracetorch_test::read_json(dir / "report.json").as_object();
  DOCTEST_CHECK(json.at("differences").at("naming").to_number<int>() == 3);
  DOCTEST_CHECK(json.at("differences").at("naming_by_rule").to_number<int>() == 3);
  DOCTEST_CHECK(json.at("within_tolerance") == true);
  const auto& row = json.at("tensors").at(2);  // Python recorded position_embeddings first
  DOCTEST_CHECK(row.at("location") == "inputs.kwargs.hidden_states");
  DOCTEST_CHECK(row.at("candidate_location") == "inputs.args.0");
  DOCTEST_CHECK(row.at("naming_rule") == boost::json::value(names + ":2"));
  DOCTEST_CHECK(row.at("order_would_pair").is_null());
  const auto& rule = json.at("arg_names").at(0);
  DOCTEST_CHECK((rule.at("matched").to_number<int>() == 3 && rule.at("calls").to_number<int>() == 1 && rule.at("stale") == false));
  DOCTEST_CHECK(rule.at("names").as_array().size() == 2);
#endif
}

DOCTEST_TEST_CASE("--arg-names: a rule that contradicts the recorded order wins, and the report says so") {
  TempDir dir;
  // Python passes attention_mask= before hidden_states=; the port passes (hidden_states, attention_mask).
  const auto python = write_attn_trace(dir / "python", {{"kwargs", {{"attention_mask", kMask}, {"hidden_states", kHidden}}}});
  const auto port = write_attn_trace(dir / "port", {{"args", boost::json::array{kHidden, kMask}}});
  // By recorded order the mask meets the hidden states: a wrong pairing that shows as a divergence.
  auto report = tracetorch::diff_traces(python, port);
  DOCTEST_CHECK(first_divergence(report) == "M.attn inputs.kwargs.attention_mask");
  DOCTEST_CHECK(report.tensors[0].candidate_location == "inputs.args.0");
  DOCTEST_CHECK(contains(report.text(), "  paired with the candidate's inputs.args.0 by recorded position (an --arg-names rule"));
  DOCTEST_CHECK(report.json().at("first_divergence").at("candidate_location") == "inputs.args.0");

  tracetorch::DiffOptions options;
  options.arg_names = tracetorch::parse_arg_names_rules("M.attn hidden_states,attention_mask\n", "names.txt");
  report = tracetorch::diff_traces(python, port, options);
  const auto text = report.text(true);
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.tensors[0].candidate_location == "inputs.args.1");
  DOCTEST_CHECK(report.counts().rule_over_order == 2);
  DOCTEST_CHECK(contains(text, "naming rule over recorded order: 2 values\n"
                               "  M.attn inputs.kwargs.attention_mask: rule names.txt:1 pairs it with inputs.args.1; "
                               "the recorded order would pair it with inputs.args.0\n"));
  DOCTEST_CHECK(contains(text, "candidate names it inputs.args.0 (rule names.txt:1), the recorded order would pair it with inputs.args.1"));
  const auto json = report.json();
  DOCTEST_CHECK(json.at("differences").at("rule_over_order").to_number<int>() == 2);
  DOCTEST_CHECK(json.at("tensors").at(0).at("order_would_pair") == "inputs.args.0");

#ifdef TRACETORCH_DIFF
  write_text(dir / "names.txt", "M.attn hidden_states,attention_mask\n");
  auto result = run_diff(python.string() + " " + port.string());
  DOCTEST_CHECK(result.exit_code == 1);
  result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "names.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "naming rule over recorded order: 2 values"));
  DOCTEST_CHECK(contains(result.output, "verdict: differences 0, accepted 0, not accepted 0: within tolerance"));
#endif
}

DOCTEST_TEST_CASE("--arg-names: values a rule aligns are compared, and a difference is the first divergence") {
  TempDir dir;
  const auto python = write_attn_trace(dir / "python", python_inputs());
  const auto port = write_attn_trace(dir / "port", port_inputs(printed("1.0000e+00, 2.5000e+00")));  // a bug in the port's input
  tracetorch::DiffOptions options;
  options.arg_names = tracetorch::parse_arg_names_rules("M.attn hidden_states,position_embeddings\n", "names.txt");
  const auto report = tracetorch::diff_traces(python, port, options);
  const auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK(!report.within_tolerance());
  DOCTEST_CHECK(first_divergence(report) == "M.attn inputs.kwargs.hidden_states");
  const auto& first = report.tensors[*report.first_divergence];
  DOCTEST_CHECK(first.candidate_location == "inputs.args.0");
  DOCTEST_CHECK((first.out_of_tolerance == 1 && first.compared == 2));
  DOCTEST_CHECK(first.max_abs_error == doctest::Approx(0.5));
  DOCTEST_CHECK(report.counts().of(tracetorch::DiffKind::values) == 1);
  DOCTEST_CHECK(report.counts().naming == 3);  // still a naming difference, and a divergence of its numbers
  DOCTEST_CHECK(contains(text, "first divergence: M.attn inputs.kwargs.hidden_states\n  out of tolerance: 1 of 2 printed values"));
  DOCTEST_CHECK(contains(text, "\n  paired with the candidate's inputs.args.0 by rule names.txt:1\n"));
  DOCTEST_CHECK(contains(text, "verdict: differences 1, accepted 0, not accepted 1: diverges"));

#ifdef TRACETORCH_DIFF
  write_text(dir / "names.txt", "M.attn hidden_states,position_embeddings\n");
  const auto result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "names.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(contains(result.output, "first divergence: M.attn inputs.kwargs.hidden_states\n"));
#endif
}

DOCTEST_TEST_CASE("--arg-names: stale rules are reported without changing the verdict, a malformed file exits 2 naming file and line") {
  TempDir dir;
  const auto python = write_attn_trace(dir / "python", python_inputs());
  const auto port = write_attn_trace(dir / "port", port_inputs());
  tracetorch::DiffOptions options;
  options.arg_names = tracetorch::parse_arg_names_rules("M.attn hidden_states,position_embeddings\n"
                                                        "M.mlp x\n"
                                                        "M hidden_states\n",
                                                        "names.txt");
  // The same trace on both sides: every value has one name, no rule is needed.
  auto report = tracetorch::diff_traces(python, python, options);
  auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.stale_arg_names().size() == 3);
  DOCTEST_CHECK(contains(text, "stale naming rule: names.txt:1 M.attn hidden_states,position_embeddings decided no value's partner "
                               "(it applied to 1 calls, none of whose values needed it)\n"));
  DOCTEST_CHECK(contains(text, "stale naming rule: names.txt:2 M.mlp x decided no value's partner "
                               "(its pattern matched no call present in both traces)\n"));
  // Against the port, the first rule is used; the others still match nothing ("M" is the root, which records no input).
  report = tracetorch::diff_traces(python, port, options);
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_REQUIRE(report.stale_arg_names().size() == 2);
  DOCTEST_CHECK(report.stale_arg_names()[0]->line == 2);
  DOCTEST_CHECK(report.stale_arg_names()[1]->calls == 1);
  DOCTEST_CHECK(report.json().at("arg_names").at(1).at("stale") == true);

#ifdef TRACETORCH_DIFF
  write_text(dir / "names.txt", "M.attn hidden_states,position_embeddings\nM.mlp x\n");
  auto result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "names.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(contains(result.output, "stale naming rule: " + (dir / "names.txt").string() + ":2 M.mlp x"));
  write_text(dir / "bad.txt", "# fine\nM.attn hidden_states,position_embeddings\nM.mlp x, y\n");
  result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "bad.txt").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, (dir / "bad.txt").string() + ":3: expected MODULE NAME,NAME,..."));
  write_text(dir / "bad.txt", "M.attn hidden_states,hidden_states\n");
  result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "bad.txt").string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, (dir / "bad.txt").string() + ":1: \"hidden_states\" is named twice"));
  result = run_diff(python.string() + " " + port.string() + " --arg-names " + (dir / "absent.txt").string());
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, (dir / "absent.txt").string() + ": cannot open"));
  result = run_diff(python.string() + " " + port.string() + " --arg-names");
  DOCTEST_CHECK(result.exit_code == 2);
  DOCTEST_CHECK(contains(result.output, "--arg-names needs a value"));
#endif
}

DOCTEST_TEST_CASE("--arg-names on the two Llama fixtures: the old positional convention against upstream's keywords") {
  // tests/data/tiny_llama records self_attn(hidden_states, position_embeddings, attention_mask)
  // positionally; tiny_llama_upstream records it by keyword in another order (hidden_states,
  // attention_mask, position_ids, ...). Same weights and input ids.
  const auto positional = tracetorch_test::tiny_llama_positional_dir() / "trace_st";
  const auto upstream = tracetorch_test::tiny_llama_dir() / "trace_st";
  const auto find = [](const tracetorch::DiffReport& report, const std::string& where) -> const tracetorch::TensorDiff& {
    for (const auto& t : report.tensors) {
      if (t.where() == where) return t;
    }
    throw std::runtime_error("no value " + where);
  };
  // By recorded order the mask (args.2) meets position_ids, the third keyword: a wrong pairing.
  auto report = tracetorch::diff_traces(positional, upstream);
  const auto& by_order = find(report, "LlamaModel.layers.0.self_attn inputs.args.2");
  DOCTEST_CHECK(by_order.candidate_location == "inputs.kwargs.position_ids");

  tracetorch::DiffOptions options;
  options.arg_names = tracetorch::parse_arg_names_rules(
      "LlamaModel.layers.*.self_attn hidden_states,position_embeddings,attention_mask\n", "names.txt");
  report = tracetorch::diff_traces(positional, upstream, options);
  DOCTEST_INFO(report.text());
  const auto& mask = find(report, "LlamaModel.layers.0.self_attn inputs.args.2");
  DOCTEST_CHECK(mask.candidate_location == "inputs.kwargs.attention_mask");
  DOCTEST_CHECK(mask.order_location == "inputs.kwargs.position_ids");
  // The masks differ in shape (the old convention broadcasts one over the batch): said as such.
  DOCTEST_CHECK(mask.status == tracetorch::DiffStatus::shape_mismatch);
  DOCTEST_CHECK(mask.reference_shape == "[1, 1, 7, 7]");
  const auto& sin = find(report, "LlamaModel.layers.3.self_attn inputs.args.1.1");
  DOCTEST_CHECK(sin.candidate_location == "inputs.kwargs.position_embeddings.1");
  DOCTEST_CHECK(report.counts().naming_by_rule == 4 * 4);  // hidden_states, cos, sin, mask in each of 4 layers
  DOCTEST_CHECK(report.counts().rule_over_order == 4);     // the mask of each layer
  DOCTEST_CHECK((report.arg_names[0].calls == 4 && report.arg_names[0].matched == 16));
}

}  // DOCTEST_TEST_SUITE
