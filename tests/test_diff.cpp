// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp: comparing two traces, naming the
// first divergence. Fixtures: tests/data/tiny_llama (Python reference traces) and
// tests/data/diff/{eps_layer2,rope_sign} (the same model and inputs with a planted bug,
// made by the Python reference; see tests/data/diff/README.md).

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "llama/llama.hpp"
#include "diff_helpers.hpp"


#include <cstdio>
#include <fstream>
#include <functional>

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::first_divergence;
using tracetorch_test::printed;
using tracetorch_test::TempDir;
using tracetorch_test::write_text;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

fs::path tiny() { return tracetorch_test::tiny_llama_dir(); }
fs::path planted(const std::string& bug) { return tracetorch_test::data_dir() / "diff" / bug; }

/// Traces the C++ port of the fixture model into `dir`; `plant` may change the model first.
void trace_cpp(const fs::path& dir, bool use_repr, const std::function<void(llama::LlamaModel&)>& plant = {}) {
  const auto config = llama::LlamaConfig::from_json_file(tiny() / "config.json");
  llama::LlamaModel model(config);
  llama::load_state_dict(*model, tiny() / "model.safetensors");
  model->eval();
  if (plant) plant(model);
  const auto ids = tracetorch::safetensors::load_single(tiny() / "input_ids.safetensors", "input_ids");
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr});
  model({.input_ids = ids});  // through the holder: forward's default arguments apply
}

llama::LlamaDecoderLayerImpl& layer(llama::LlamaModel& model, std::size_t i) {
  return *model->layers[i]->as<llama::LlamaDecoderLayerImpl>();
}


/// Everything before the first divergence agrees, and something after it was compared too.
void check_clean_before_first_divergence(const tracetorch::DiffReport& report) {
  DOCTEST_REQUIRE(report.first_divergence.has_value());
  for (std::size_t i = 0; i < *report.first_divergence; ++i) DOCTEST_CHECK(!report.tensors[i].diverges());
  DOCTEST_CHECK(report.only_in_reference.empty());
  DOCTEST_CHECK(report.only_in_candidate.empty());
}

/// A one-module trace "M" with an input tensor and an output tensor, stored as safetensors files.
void write_small_trace(const fs::path& dir, const torch::Tensor& input, const torch::Tensor& output,
                       const std::string& root = "M") {
  fs::create_directories(dir);
  tracetorch::safetensors::save(dir / (root + ".leaf_inputs_args_0.safetensors"), input);
  tracetorch::safetensors::save(dir / (root + ".leaf_outputs.safetensors"), output);
  const auto tensor_json = [&](const torch::Tensor& t, const std::string& stem) {
    return boost::json::object{{"shape", tracetorch::python_shape_repr(t.sizes())},
                               {"dtype", tracetorch::python_dtype_repr(t.scalar_type())},
                               {"value", "./" + stem + ".safetensors"}};
  };
  boost::json::object leaf{{"module_path", root + ".leaf"},
                           {"inputs", {{"args", boost::json::array{tensor_json(input, root + ".leaf_inputs_args_0")}}}},
                           {"outputs", tensor_json(output, root + ".leaf_outputs")}};
  boost::json::object top{{"module_path", root}, {"inputs", {{"args", boost::json::array{}}}},
                          {"children", boost::json::array{leaf}}};
  std::ofstream(dir / (root + "_debug_tree_FULL_TENSORS.json")) << boost::json::serialize(top);
}

/// A module call node; `outputs` left out when null, as the debugger leaves out a parent's.
boost::json::object node(const std::string& path, boost::json::object inputs, boost::json::value outputs = nullptr,
                         boost::json::array children = {}) {
  boost::json::object out{{"module_path", path}, {"inputs", std::move(inputs)}};
  if (!outputs.is_null()) out["outputs"] = std::move(outputs);
  if (!children.empty()) out["children"] = std::move(children);
  return out;
}

/// Writes a hand-made trace whose root is "M" into `dir`.
fs::path write_trace(const fs::path& dir, const boost::json::object& root) {
  fs::create_directories(dir);
  write_text(dir / "M_debug_tree_FULL_TENSORS.json", boost::json::serialize(root));
  return dir;
}

/// M calls M.a (a tensor in, a cache object's repr out) and M.b; `cache` and `with_b` vary.
boost::json::object cache_model(const std::string& cache, bool with_b, bool with_c = false) {
  boost::json::array children{node("M.a", {{"args", boost::json::array{printed("1.0000e+00, 2.0000e+00")}}},
                                   boost::json::array{printed("3.0000e+00, 4.0000e+00"), boost::json::string(cache)})};
  if (with_b) children.push_back(node("M.b", {{"args", boost::json::array{printed("5.0000e+00, 6.0000e+00")}}}, printed("0.0000e+00, 1.0000e+00")));
  if (with_c) children.push_back(node("M.c", {{"args", boost::json::array{printed("5.0000e+00, 6.0000e+00")}}}, printed("0.0000e+00, 1.0000e+00")));
  return node("M", {{"args", boost::json::array{}}}, nullptr, children);
}

/// Copies a trace directory so that one file of it can be spoiled.
fs::path copy_trace(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

}  // namespace

DOCTEST_TEST_SUITE("diff") {

DOCTEST_TEST_CASE("the C++ port's trace matches the Python reference trace, tensors and printed values") {
  TempDir dir;
  trace_cpp(dir / "st", /*use_repr=*/false);
  const auto report = tracetorch::diff_traces(tiny() / "trace_st", dir / "st");
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.reference_values == "safetensors");
  DOCTEST_CHECK(report.candidate_values == "safetensors");
  DOCTEST_CHECK(report.reference_calls == 56);
  DOCTEST_CHECK(report.candidate_calls == 56);
  DOCTEST_CHECK(!report.precision_limited());
  std::size_t compared = 0;
  for (const auto& t : report.tensors) {
    if (t.is_tensor && t.compared > 0) ++compared;
    DOCTEST_CHECK(t.cosine_similarity > 0.999999);
  }
  DOCTEST_CHECK(compared == 142);  // every tensor of the trace with its data, the root output file included
  DOCTEST_CHECK(report.text().find("no divergence: all 142 tensors within tolerance, all 12 other values equal") != std::string::npos);

  trace_cpp(dir / "repr", /*use_repr=*/true);
  const auto printed = tracetorch::diff_traces(tiny() / "trace_repr", dir / "repr");
  DOCTEST_INFO(printed.text());
  DOCTEST_CHECK(printed.within_tolerance());
  DOCTEST_CHECK(printed.precision_limited());
  DOCTEST_CHECK(printed.text().find("precision is limited to the printed digits") != std::string::npos);

  // One side printed, the other as files: the file's tensor is printed as Python prints it.
  DOCTEST_CHECK(tracetorch::diff_traces(tiny() / "trace_repr", dir / "st").within_tolerance());

#ifdef TRACETORCH_DIFF
  const auto result = run_diff((tiny() / "trace_st").string() + " " + (dir / "st").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  DOCTEST_CHECK(result.output.find("no divergence") != std::string::npos);
  DOCTEST_CHECK(result.output.find("\r") == std::string::npos);  // no progress line into a pipe
#endif
}

DOCTEST_TEST_CASE("planted Python bugs: the first divergence is the module the bug changes") {
  // make_fixture.py --bug eps_layer2: layers.2.post_attention_layernorm has epsilon 1e-1.
  auto report = tracetorch::diff_traces(tiny() / "trace_st", planted("eps_layer2"));
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.2.post_attention_layernorm outputs");
  check_clean_before_first_divergence(report);
  const auto& eps = report.tensors[*report.first_divergence];
  DOCTEST_CHECK(eps.status == tracetorch::DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(eps.out_of_tolerance > 0);
  DOCTEST_CHECK(eps.compared == 2 * 7 * 64);

  // --bug rope_sign: rotate_half's sign flipped. The rotation happens inside the attention,
  // between the projections and o_proj, so o_proj's input is the first recorded tensor it changes.
  report = tracetorch::diff_traces(tiny() / "trace_st", planted("rope_sign"));
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.0.self_attn.o_proj inputs.args.0");
  check_clean_before_first_divergence(report);

  // Against printed values too (precision-limited, but a real bug is far above it).
  report = tracetorch::diff_traces(tiny() / "trace_repr", planted("eps_layer2"));
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.2.post_attention_layernorm outputs");
  check_clean_before_first_divergence(report);

#ifdef TRACETORCH_DIFF
  const auto result = run_diff((tiny() / "trace_st").string() + " " + planted("rope_sign").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  DOCTEST_CHECK(result.output.find("\nfirst divergence: LlamaModel.layers.0.self_attn.o_proj inputs.args.0\n") !=
                std::string::npos);
  DOCTEST_CHECK(result.output.find("worst modules:") != std::string::npos);
#endif
}

DOCTEST_TEST_CASE("planted C++ bugs: a wrong epsilon, swapped projection weights") {
  TempDir dir;
  // A port that reads rms_norm_eps wrongly in one layer.
  trace_cpp(dir / "eps", false, [](llama::LlamaModel& m) { layer(m, 1).input_layernorm->variance_epsilon = 1e-2; });
  auto report = tracetorch::diff_traces(tiny() / "trace_st", dir / "eps");
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.1.input_layernorm outputs");
  check_clean_before_first_divergence(report);

  // A port that maps gate_proj's weights to up_proj and back in the last layer.
  trace_cpp(dir / "swap", false, [](llama::LlamaModel& m) {
    torch::NoGradGuard no_grad;
    auto& mlp = *layer(m, 3).mlp;
    const auto gate = mlp.gate_proj->weight.clone();
    mlp.gate_proj->weight.copy_(mlp.up_proj->weight);
    mlp.up_proj->weight.copy_(gate);
  });
  report = tracetorch::diff_traces(tiny() / "trace_st", dir / "swap");
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.3.mlp.gate_proj outputs");
  check_clean_before_first_divergence(report);
  // The worst-modules table: diverging modules first; gate_proj's input is fine, its output not.
  const auto modules = report.modules();
  bool seen_clean = false;
  for (const auto& m : modules) {
    if (m.diverging == 0) seen_clean = true;
    DOCTEST_CHECK(!(seen_clean && m.diverging > 0));
    if (m.module_path == "LlamaModel.layers.3.mlp.gate_proj") DOCTEST_CHECK((m.tensors == 2 && m.diverging == 1));
    if (m.module_path.starts_with("LlamaModel.layers.2.")) DOCTEST_CHECK(m.diverging == 0);
  }
}

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

DOCTEST_TEST_CASE("the JSON report and the progress callback") {
  TempDir dir;
  std::size_t calls = 0, last_total = 0;
  tracetorch::DiffOptions options;
  options.progress = [&](std::size_t done, std::size_t total) {
    ++calls;
    DOCTEST_CHECK(done == calls);
    last_total = total;
  };
  const auto report = tracetorch::diff_traces(tiny() / "trace_st", planted("eps_layer2"), options);
  DOCTEST_CHECK(calls == report.tensors.size());
  DOCTEST_CHECK(last_total == report.tensors.size());

  const auto check_json = [&](const boost::json::value& json) {
    DOCTEST_CHECK(json.at("within_tolerance") == false);
    DOCTEST_CHECK(json.at("first_divergence").at("module_path") == "LlamaModel.layers.2.post_attention_layernorm");
    DOCTEST_CHECK(json.at("first_divergence").at("location") == "outputs");
    DOCTEST_CHECK(json.at("atol") == 1e-5);
    const auto& rows = json.at("tensors").as_array();
    DOCTEST_CHECK(rows.size() == report.tensors.size());
    const auto index = json.at("first_divergence").at("index").to_number<std::size_t>();
    const auto& row = rows.at(index);
    DOCTEST_CHECK(row.at("status") == "out of tolerance");
    DOCTEST_CHECK(row.at("reference_shape") == "[2, 7, 64]");
    // The error the report gives is the error between the two files.
    const auto file = "LlamaModel.layers.2.post_attention_layernorm_outputs.safetensors";
    const auto a = tracetorch::safetensors::load_single(planted("eps_layer2") / file).to(torch::kDouble);
    const auto b = tracetorch::safetensors::load_single(tiny() / "trace_st" / file).to(torch::kDouble);
    DOCTEST_CHECK(row.at("max_abs_error").to_number<double>() == doctest::Approx((a - b).abs().max().item<double>()));
    const auto out = ((a - b).abs() > 1e-5 + 1e-4 * b.abs()).sum().item<std::int64_t>();
    DOCTEST_CHECK(row.at("out_of_tolerance").to_number<std::int64_t>() == out);
    DOCTEST_CHECK(row.at("cosine_similarity").to_number<double>() ==
                  doctest::Approx(torch::cosine_similarity(a.reshape(-1), b.reshape(-1), 0).item<double>()));
    DOCTEST_CHECK(json.at("modules").as_array().at(0).at("diverging").to_number<int>() > 0);
  };
  check_json(report.json());

#ifdef TRACETORCH_DIFF
  const auto result = run_diff((tiny() / "trace_st").string() + " " + planted("eps_layer2").string() + " --all --json " +
                               (dir / "report.json").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 1);
  check_json(tracetorch_test::read_json(dir / "report.json"));
  // --all lists every compared value, one line each.
  DOCTEST_CHECK(result.output.find("all compared values:") != std::string::npos);
  DOCTEST_CHECK(result.output.find("  LlamaModel.embed_tokens inputs.args.0: ok") != std::string::npos);
  DOCTEST_CHECK(result.output.find("  LlamaModel.norm outputs: out of tolerance") != std::string::npos);
#endif
}

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
                               "dtype 0; values only in reference 0, only in candidate 0; module calls only in "
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

DOCTEST_TEST_CASE("a bf16 reference against the fp32 port: numbers compared at bf16's tolerance, the dtype reported apart") {
  TempDir dir;
  trace_cpp(dir / "st", /*use_repr=*/false);
  // make_upstream_fixture.py --dtype bfloat16: the Python reference run in bf16 on the tiny weights.
  auto report = tracetorch::diff_traces(planted("bf16"), dir / "st");
  auto text = report.text();
  DOCTEST_INFO(text);
  DOCTEST_CHECK(report.within_tolerance());
  const auto n = report.counts();
  DOCTEST_CHECK(n.of(tracetorch::DiffKind::dtype) == 0);
  DOCTEST_CHECK(n.across_dtypes == 123);  // every floating tensor; ids and positions are int64 on both sides
  std::size_t compared = 0;
  for (const auto& t : report.tensors) {
    if (!t.is_tensor || !t.across_dtypes()) continue;
    compared += t.compared > 0 ? 1 : 0;
    DOCTEST_CHECK((t.atol == 0x1p-6 && t.rtol == 0x1p-6));  // twice bf16's epsilon 2^-7
  }
  DOCTEST_CHECK(compared == 123);
  DOCTEST_CHECK(contains(text, "dtypes: 123 tensors compared across dtypes, reference torch.bfloat16 against torch.float32"));
  DOCTEST_CHECK(contains(text, "(bf16/fp16 pairs: at least twice the lower precision's epsilon)"));

  // The planted epsilon bug, in the bf16 reference, is still where it first shows.
  report = tracetorch::diff_traces(planted("bf16_eps_layer2"), dir / "st");
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.layers.2.post_attention_layernorm outputs");
  check_clean_before_first_divergence(report);

  // Held to fp32's tolerance instead, the bf16 rounding fails at the first floating tensor.
  tracetorch::DiffOptions options;
  options.precision_tolerance = false;
  report = tracetorch::diff_traces(planted("bf16"), dir / "st", options);
  DOCTEST_CHECK(first_divergence(report) == "LlamaModel.embed_tokens outputs");

  // fp16 against fp32, by hand: within twice fp16's epsilon (2^-9), beyond it, and float64
  // against float32 still a dtype mismatch (the test above).
  write_small_trace(dir / "half", torch::ones({2}, torch::kHalf), torch::tensor({1.0f, 2.0f}).to(torch::kHalf));
  write_small_trace(dir / "close", torch::ones({2}), torch::tensor({1.0f + 1e-3f, 2.0f + 4e-3f}));
  write_small_trace(dir / "far", torch::ones({2}), torch::tensor({1.0f, 2.02f}));
  report = tracetorch::diff_traces(dir / "half", dir / "close");
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.counts().across_dtypes == 2);
  DOCTEST_CHECK(report.tensors[1].atol == 0x1p-9);
  DOCTEST_CHECK(first_divergence(tracetorch::diff_traces(dir / "half", dir / "far")) == "M.leaf outputs");

#ifdef TRACETORCH_DIFF
  auto result = run_diff(planted("bf16").string() + " " + (dir / "st").string());
  DOCTEST_INFO(result.output);
  DOCTEST_CHECK(result.exit_code == 0);
  result = run_diff(planted("bf16").string() + " " + (dir / "st").string() + " --no-precision-tolerance");
  DOCTEST_CHECK(result.exit_code == 1);
#endif
}

}  // DOCTEST_TEST_SUITE
