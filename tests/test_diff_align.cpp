// include/tracetorch/detail/diff/align.hpp and format.hpp: aligning two traces, on traces built
// in memory (no JSON, no file): calls by renamed path and call order, values by location, and
// args.N against kwargs.NAME by position or by an argument-name rule (arg_names.hpp).

#include <doctest/doctest.h>

#include <tracetorch/detail/diff/align.hpp>
#include <tracetorch/diff/arg_names.hpp>
#include <tracetorch/detail/trace_format/format.hpp>

#include <initializer_list>
#include <string>
#include <vector>

namespace {

using tracetorch::DiffStatus;
using tracetorch::detail::Alignment;
using tracetorch::detail::Trace;
using tracetorch::detail::TraceCall;
using tracetorch::detail::TraceSlot;

/// A slot at `location`: a tensor, or (with `text`) another value.
TraceSlot slot(const std::string& location, const std::string& text = {}) {
  TraceSlot out;
  out.location = location;
  out.is_tensor = text.empty();
  out.text = text;
  return out;
}

/// Appends calls one after another (no nesting), numbering their events as the reader does:
/// the inputs, the outputs, then the call's exit.
struct TraceBuilder {
  Trace trace;
  std::size_t order = 0;

  TraceBuilder& call(const std::string& path, std::vector<TraceSlot> inputs, std::vector<TraceSlot> outputs = {}) {
    TraceCall c;
    c.module_path = path;
    c.enter_order = order;
    for (auto& s : inputs) {
      s.order = order++;
      // "inputs.kwargs.mask.0" -> top-level input "kwargs.mask"
      const auto kind_end = s.location.find('.', 7);
      const auto key_end = s.location.find('.', kind_end + 1);
      const std::string key = s.location.substr(7, key_end == std::string::npos ? std::string::npos : key_end - 7);
      if (c.input_keys.empty() || c.input_keys.back() != key) c.input_keys.push_back(key);
    }
    for (auto& s : outputs) s.order = order++;
    c.inputs = std::move(inputs);
    c.outputs = std::move(outputs);
    c.exit_order = order++;
    trace.calls.push_back(std::move(c));
    return *this;
  }
};

std::string same_name(std::string path) { return path; }

/// One argument-name rule, as a rules file's line would give it.
tracetorch::ArgNamesRule names_rule(const std::string& pattern, std::vector<std::string> names, std::size_t line = 1) {
  tracetorch::ArgNamesRule rule;
  rule.file = "names.txt";
  rule.line = line;
  rule.module_pattern = pattern;
  rule.names = std::move(names);
  return rule;
}

/// "path location status" per aligned value, in alignment order.
std::vector<std::string> rows(const Alignment& alignment) {
  std::vector<std::string> out;
  for (const auto& v : alignment.values) {
    out.push_back(v.diff.where() + " " + tracetorch::to_string(v.diff.status) + (v.diff.call_missing ? " (call missing)" : ""));
  }
  return out;
}

}  // namespace

DOCTEST_TEST_SUITE("trace align") {

DOCTEST_TEST_CASE("the k-th call of a path meets the k-th, and an extra call's values come after the reference's") {
  TraceBuilder ref, cand;
  for (int i = 0; i < 2; ++i) ref.call("M.f", {slot("inputs.args.0")}, {slot("outputs")});
  for (int i = 0; i < 3; ++i) cand.call("M.f", {slot("inputs.args.0")}, {slot("outputs")});
  const auto alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, same_name);
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{
                                       "M.f inputs.args.0 ok", "M.f outputs ok", "M.f inputs.args.0 (call 2) ok",
                                       "M.f outputs (call 2) ok", "M.f inputs.args.0 (call 3) only in candidate (call missing)",
                                       "M.f outputs (call 3) only in candidate (call missing)"});
  DOCTEST_REQUIRE(alignment.missing_calls.size() == 1);
  DOCTEST_CHECK(alignment.missing_calls[0].name() == "M.f (call 3)");
  DOCTEST_CHECK(!alignment.missing_calls[0].in_reference);
  DOCTEST_CHECK(alignment.values[4].reference == nullptr);
  DOCTEST_CHECK(alignment.values[4].candidate == &cand.trace.calls[2].inputs[0]);
  // Paired values point at the two sides' slots.
  DOCTEST_CHECK(alignment.values[2].reference == &ref.trace.calls[1].inputs[0]);
  DOCTEST_CHECK(alignment.values[2].candidate == &cand.trace.calls[1].inputs[0]);

  // The other way round: the reference's third call is missing from the candidate, in its place.
  const auto reverse = tracetorch::detail::align_traces(cand.trace, ref.trace, same_name);
  DOCTEST_CHECK(reverse.values[4].diff.status == DiffStatus::only_in_reference);
  DOCTEST_CHECK(reverse.values[4].diff.call == 3);
  DOCTEST_CHECK((reverse.missing_calls.size() == 1 && reverse.missing_calls[0].in_reference));
}

DOCTEST_TEST_CASE("values pair by location: one-sided values stay with their call's inputs or outputs") {
  TraceBuilder ref, cand;
  ref.call("A", {slot("inputs.args.0")}, {slot("outputs")}).call("B", {slot("inputs.args.0")}, {slot("outputs.0"), slot("outputs.1")});
  cand.call("A", {slot("inputs.args.0"), slot("inputs.kwargs.mask", "None")}, {slot("outputs")})
      .call("B", {slot("inputs.args.0")}, {slot("outputs.0")});
  const auto alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, same_name);
  // The candidate's mask is one of A's inputs: it comes before A's outputs (issue 39).
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"A inputs.args.0 ok", "A inputs.kwargs.mask only in candidate",
                                                            "A outputs ok", "B inputs.args.0 ok",
                                                            "B outputs.0 ok", "B outputs.1 only in reference"});
  DOCTEST_CHECK(alignment.missing_calls.empty());
  DOCTEST_CHECK(!alignment.values[1].diff.is_tensor);  // the candidate's value says what it is
  DOCTEST_CHECK(!alignment.values[1].diff.naming_differs());
}

DOCTEST_TEST_CASE("a call on the candidate's side only lies where it ran; calls in another order among their siblings are order differences") {
  TraceBuilder ref, cand;
  ref.call("A", {slot("inputs.args.0")}).call("C", {slot("inputs.args.0")});
  cand.call("A", {slot("inputs.args.0")}).call("B", {slot("inputs.args.0")}).call("C", {slot("inputs.args.0")});
  auto alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, same_name);
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"A inputs.args.0 ok", "B inputs.args.0 only in candidate (call missing)",
                                                            "C inputs.args.0 ok"});

  // C ran first: one call out of order, placed where the orders part (at A's start), both orders kept.
  TraceBuilder moved;
  moved.call("C", {slot("inputs.args.0")}).call("A", {slot("inputs.args.0")});
  alignment = tracetorch::detail::align_traces(ref.trace, moved.trace, same_name);
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"C order differs", "A inputs.args.0 ok", "C inputs.args.0 ok"});
  const auto& order = alignment.values[0].diff;
  DOCTEST_CHECK(order.kind() == tracetorch::DiffKind::order);
  DOCTEST_CHECK((order.reference_order == std::vector<std::string>{"A", "C"} && order.candidate_order == std::vector<std::string>{"C", "A"}));
  DOCTEST_CHECK((alignment.values[0].reference == nullptr && alignment.values[0].candidate == nullptr));

  // Calls of one path keep their numbers: f's second call ran before g.
  TraceBuilder fgf, ffg;
  fgf.call("f", {slot("inputs.args.0")}).call("g", {slot("inputs.args.0")}).call("f", {slot("inputs.args.0")});
  ffg.call("f", {slot("inputs.args.0")}).call("f", {slot("inputs.args.0")}).call("g", {slot("inputs.args.0")});
  alignment = tracetorch::detail::align_traces(fgf.trace, ffg.trace, same_name);
  std::vector<std::string> out_of_order;
  for (const auto& v : alignment.values) {
    if (v.diff.is_order()) out_of_order.push_back(v.diff.where() + ": " + v.diff.candidate_order[1]);
  }
  DOCTEST_CHECK(out_of_order == std::vector<std::string>{"f (call 2): f (call 2)"});
  // The same order on both sides: nothing.
  DOCTEST_CHECK(tracetorch::detail::align_traces(fgf.trace, fgf.trace, same_name).values.size() == 3);
}

DOCTEST_TEST_CASE("renames apply to both sides before calls are numbered") {
  TraceBuilder ref, cand;
  ref.call("M.layers.0", {slot("inputs.args.0")}).call("M.layers.0", {slot("inputs.args.0")});
  cand.call("Model.blocks.0", {slot("inputs.args.0")}).call("Model.block_0", {slot("inputs.args.0")});
  auto alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, same_name);
  DOCTEST_CHECK(alignment.missing_calls.size() == 4);  // two on each side
  DOCTEST_CHECK(alignment.missing_calls[0].in_reference);
  DOCTEST_CHECK(!alignment.missing_calls[3].in_reference);

  // Both candidate paths become M.layers.0: its first and second call.
  const auto rename = [](std::string path) {
    if (path.starts_with("Model.")) return std::string("M.layers.0");
    return path;
  };
  alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, rename);
  DOCTEST_CHECK(alignment.missing_calls.empty());
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"M.layers.0 inputs.args.0 ok", "M.layers.0 inputs.args.0 (call 2) ok"});
  DOCTEST_CHECK(alignment.values[1].candidate == &cand.trace.calls[1].inputs[0]);

  const auto keys = tracetorch::detail::number_calls(cand.trace, rename);
  DOCTEST_CHECK((keys == std::vector<tracetorch::detail::CallKey>{{"M.layers.0", 1}, {"M.layers.0", 2}}));
}

DOCTEST_TEST_CASE("args.N against kwargs.NAME: the same position, no name taken, the same structure") {
  using tracetorch::detail::renamed_input;
  TraceBuilder python, port;
  python.call("M", {slot("inputs.kwargs.hidden_states"), slot("inputs.kwargs.pe.0"), slot("inputs.kwargs.pe.1")});
  port.call("M", {slot("inputs.args.0"), slot("inputs.args.1.0"), slot("inputs.args.1.1")});
  const TraceCall& a = python.trace.calls[0];
  const TraceCall& b = port.trace.calls[0];
  DOCTEST_CHECK((a.input_keys == std::vector<std::string>{"kwargs.hidden_states", "kwargs.pe"}));
  DOCTEST_CHECK(renamed_input(a, b, "inputs.kwargs.hidden_states") == "inputs.args.0");
  DOCTEST_CHECK(renamed_input(a, b, "inputs.kwargs.pe.1") == "inputs.args.1.1");
  DOCTEST_CHECK(renamed_input(b, a, "inputs.args.1.0") == "inputs.kwargs.pe.0");
  auto alignment = tracetorch::detail::align_traces(python.trace, port.trace, same_name);
  DOCTEST_REQUIRE(alignment.values.size() == 3);
  for (const auto& v : alignment.values) DOCTEST_CHECK((v.diff.naming_differs() && v.diff.status == DiffStatus::within_tolerance));
  DOCTEST_CHECK(alignment.values[2].diff.candidate_location == "inputs.args.1.1");

  // Another structure below the input (one element, not two): not the same value.
  TraceBuilder other;
  other.call("M", {slot("inputs.args.0"), slot("inputs.args.1.0")});
  DOCTEST_CHECK(renamed_input(a, other.trace.calls[0], "inputs.kwargs.pe.0").empty());
  DOCTEST_CHECK(renamed_input(a, other.trace.calls[0], "inputs.kwargs.hidden_states") == "inputs.args.0");
  // Both sides positional, or both by keyword: a name that differs is a different value.
  TraceBuilder keywords;
  keywords.call("M", {slot("inputs.kwargs.x"), slot("inputs.kwargs.pe.0"), slot("inputs.kwargs.pe.1")});
  DOCTEST_CHECK(renamed_input(a, keywords.trace.calls[0], "inputs.kwargs.hidden_states").empty());
  // The candidate's name at that position is the reference's name for another value: not taken.
  TraceBuilder positional, named;
  positional.call("M", {slot("inputs.args.0"), slot("inputs.kwargs.y")});
  named.call("M", {slot("inputs.kwargs.y"), slot("inputs.kwargs.z")});
  DOCTEST_CHECK(renamed_input(positional.trace.calls[0], named.trace.calls[0], "inputs.args.0").empty());
  alignment = tracetorch::detail::align_traces(python.trace, other.trace, same_name);
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"M inputs.kwargs.hidden_states ok", "M inputs.kwargs.pe.0 only in reference",
                                                            "M inputs.kwargs.pe.1 only in reference",
                                                            "M inputs.args.1.0 only in candidate"});
}

DOCTEST_TEST_CASE("an argument-name rule aligns args.N with kwargs.NAME where the recorded order does not") {
  // The port passes (hidden_states, (cos, sin)) positionally; Python passes them by keyword, in
  // another order: by position a tensor meets a tuple, so the order aligns nothing.
  TraceBuilder port, python;
  port.call("M.layers.0.attn", {slot("inputs.args.0"), slot("inputs.args.1.0"), slot("inputs.args.1.1")}, {slot("outputs")});
  python.call("M.layers.0.attn", {slot("inputs.kwargs.pe.0"), slot("inputs.kwargs.pe.1"), slot("inputs.kwargs.hidden_states")},
              {slot("outputs")});
  auto alignment = tracetorch::detail::align_traces(port.trace, python.trace, same_name);
  // Each side's inputs before the call's outputs (issue 39), the reference's first.
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{
                                       "M.layers.0.attn inputs.args.0 only in reference", "M.layers.0.attn inputs.args.1.0 only in reference",
                                       "M.layers.0.attn inputs.args.1.1 only in reference",
                                       "M.layers.0.attn inputs.kwargs.pe.0 only in candidate",
                                       "M.layers.0.attn inputs.kwargs.pe.1 only in candidate",
                                       "M.layers.0.attn inputs.kwargs.hidden_states only in candidate", "M.layers.0.attn outputs ok"});

  std::vector<tracetorch::ArgNamesRule> rules{names_rule("M.layers.*.mlp", {"x"}, 1), names_rule("M.layers.*", {"hidden_states", "pe"}, 2)};
  alignment = tracetorch::detail::align_traces(port.trace, python.trace, same_name, rules);
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"M.layers.0.attn inputs.args.0 ok", "M.layers.0.attn inputs.args.1.0 ok",
                                                            "M.layers.0.attn inputs.args.1.1 ok", "M.layers.0.attn outputs ok"});
  const std::vector<std::string> partners{"inputs.kwargs.hidden_states", "inputs.kwargs.pe.0", "inputs.kwargs.pe.1"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& d = alignment.values[i].diff;
    DOCTEST_CHECK(d.candidate_location == partners[i]);
    DOCTEST_CHECK(d.naming_rule == 1u);  // the first rule whose glob matches the path
    DOCTEST_CHECK(!d.rule_over_order());
  }
  DOCTEST_CHECK(alignment.values[0].candidate == &python.trace.calls[0].inputs[2]);
  DOCTEST_CHECK(!alignment.values[3].diff.naming_rule.has_value());  // outputs: same name, no rule involved
  DOCTEST_CHECK((rules[0].calls == 0 && rules[0].matched == 0));      // a stale rule: matched no call
  DOCTEST_CHECK((rules[1].calls == 1 && rules[1].matched == 3));

  // Positions the rule does not name are left to the recorded order.
  TraceBuilder more, more_python;
  more.call("M.layers.0.attn", {slot("inputs.args.0"), slot("inputs.args.1")});
  more_python.call("M.layers.0.attn", {slot("inputs.kwargs.hidden_states"), slot("inputs.kwargs.cache")});
  std::vector<tracetorch::ArgNamesRule> short_rule{names_rule("*", {"hidden_states"})};
  alignment = tracetorch::detail::align_traces(more.trace, more_python.trace, same_name, short_rule);
  DOCTEST_CHECK(alignment.values[1].diff.candidate_location == "inputs.kwargs.cache");
  DOCTEST_CHECK(!alignment.values[1].diff.naming_rule.has_value());
  DOCTEST_CHECK(short_rule[0].matched == 1);
}

DOCTEST_TEST_CASE("a rule that contradicts the recorded order wins, and the order's pairing is kept for the report") {
  // Python passes attention_mask= before hidden_states=; by position args.0 would meet the mask.
  TraceBuilder port, python;
  port.call("M.attn", {slot("inputs.args.0"), slot("inputs.args.1")});
  python.call("M.attn", {slot("inputs.kwargs.attention_mask"), slot("inputs.kwargs.hidden_states")});
  auto alignment = tracetorch::detail::align_traces(port.trace, python.trace, same_name);
  DOCTEST_CHECK(alignment.values[0].diff.candidate_location == "inputs.kwargs.attention_mask");  // wrong, but allowed

  std::vector<tracetorch::ArgNamesRule> rules{names_rule("M.attn", {"hidden_states", "attention_mask"})};
  alignment = tracetorch::detail::align_traces(port.trace, python.trace, same_name, rules);
  DOCTEST_REQUIRE(alignment.values.size() == 2);
  DOCTEST_CHECK(alignment.values[0].diff.candidate_location == "inputs.kwargs.hidden_states");
  DOCTEST_CHECK(alignment.values[0].diff.order_location == "inputs.kwargs.attention_mask");
  DOCTEST_CHECK(alignment.values[1].diff.candidate_location == "inputs.kwargs.attention_mask");
  DOCTEST_CHECK(alignment.values[1].diff.order_location == "inputs.kwargs.hidden_states");
  DOCTEST_CHECK(alignment.values[0].candidate == &python.trace.calls[0].inputs[1]);
  DOCTEST_CHECK(rules[0].matched == 2);

  // The rule names args.0 hidden_states, which the other side does not record: left apart,
  // against the order's offer of kwargs.x (said, not hidden), and the same from the other side.
  TraceBuilder other;
  other.call("M.attn", {slot("inputs.kwargs.x"), slot("inputs.kwargs.attention_mask")});
  alignment = tracetorch::detail::align_traces(port.trace, other.trace, same_name, rules);
  // kwargs.x came before the paired input on the candidate's side: so it lies here.
  DOCTEST_CHECK(rows(alignment) == std::vector<std::string>{"M.attn inputs.args.0 only in reference",
                                                            "M.attn inputs.kwargs.x only in candidate", "M.attn inputs.args.1 ok"});
  DOCTEST_CHECK(alignment.values[0].diff.order_location == "inputs.kwargs.x");
  DOCTEST_CHECK(alignment.values[0].diff.naming_rule == 0u);
  alignment = tracetorch::detail::align_traces(other.trace, port.trace, same_name, rules);
  DOCTEST_CHECK(alignment.values[0].diff.status == DiffStatus::only_in_reference);  // kwargs.x: the rule names args.0 otherwise
  DOCTEST_CHECK(alignment.values[0].diff.order_location == "inputs.args.0");

  // Where the rule and the order agree, nothing is said against the order.
  TraceBuilder agreeing;
  agreeing.call("M.attn", {slot("inputs.kwargs.hidden_states"), slot("inputs.kwargs.attention_mask")});
  alignment = tracetorch::detail::align_traces(port.trace, agreeing.trace, same_name, rules);
  for (const auto& v : alignment.values) DOCTEST_CHECK((v.diff.naming_differs() && !v.diff.rule_over_order()));
}

DOCTEST_TEST_CASE("a top-level input holds its own place and the places below it, not a longer name's") {
  TraceBuilder builder;
  builder.call("M", {slot("inputs.args.1"), slot("inputs.args.10.0")});
  const TraceCall& call = builder.trace.calls[0];
  DOCTEST_CHECK(tracetorch::detail::input_position(call, "inputs.args.1") == 0u);
  DOCTEST_CHECK(tracetorch::detail::input_position(call, "inputs.args.10.0") == 1u);
  DOCTEST_CHECK(!tracetorch::detail::input_position(call, "inputs.args.2").has_value());
  DOCTEST_CHECK((tracetorch::detail::input_structure(call, "args.10") == std::vector<std::pair<std::string, bool>>{{".0", true}}));
  DOCTEST_CHECK((tracetorch::detail::input_structure(call, "args.1") == std::vector<std::pair<std::string, bool>>{{"", true}}));
}

DOCTEST_TEST_CASE("a root output read from its file is marked so, on either side") {
  TraceBuilder ref, cand;
  auto from_file = slot("outputs.0");
  from_file.from_file_only = true;
  ref.call("M", {}, {from_file});
  cand.call("M", {}, {slot("outputs.0")});
  const auto alignment = tracetorch::detail::align_traces(ref.trace, cand.trace, same_name);
  DOCTEST_REQUIRE(alignment.values.size() == 1);
  DOCTEST_CHECK(alignment.values[0].diff.from_file);
  DOCTEST_CHECK(!tracetorch::detail::align_traces(cand.trace, cand.trace, same_name).values[0].diff.from_file);
}

DOCTEST_TEST_CASE("the trace format's file names") {
  namespace format = tracetorch::detail::trace_format;
  DOCTEST_CHECK(format::full_tensors_file_name("LlamaModel") == "LlamaModel_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(format::summary_file_name("LlamaModel") == "LlamaModel_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(format::tensor_file_name("./M.a_outputs.safetensors") == "M.a_outputs.safetensors");
  DOCTEST_CHECK(format::tensor_file_name("M.a_outputs.safetensors") == "M.a_outputs.safetensors");
}

}  // DOCTEST_TEST_SUITE
