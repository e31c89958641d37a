// include/tracetorch/diff.hpp and tools/tracetorch_diff.cpp on the Llama fixtures: the C++ port's
// trace against the Python reference traces (tests/data/tiny_llama), bugs planted in Python
// (tests/data/diff/{eps_layer2,rope_sign}, made by the Python reference; see
// tests/data/diff/README.md) and in the C++ port, a bf16 reference, the JSON report.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>

#include "diff_helpers.hpp"
#include "llama/llama.hpp"

#include <algorithm>
#include <functional>

// A named namespace around the file: its using-declarations stay apart from the `contains` and
// `write_trace` of other test files compiled with it (unity build).
namespace diff_test {

namespace {

namespace fs = std::filesystem;
using tracetorch_test::contains;
using tracetorch_test::first_divergence;
using tracetorch_test::planted;
using tracetorch_test::TempDir;
using tracetorch_test::tiny;
using tracetorch_test::write_small_trace;
#ifdef TRACETORCH_DIFF
using tracetorch_test::run_diff;
#endif

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

DOCTEST_TEST_CASE("traces of two different roots: one note says so and names the rename that would align them") {
  // The Gemma fixture against the Llama one: nothing aligns, and the note says why in one line.
  const auto gemma = tracetorch_test::data_dir() / "gemma" / "trace_repr";
  const auto report = tracetorch::diff_traces(gemma, tiny() / "trace_repr");
  const std::string note = "the roots differ: GemmaModel in the reference, LlamaModel in the candidate, so no module path is "
                           "shared; if they are one model under two names, a rename aligns them (tracetorch-diff --map "
                           "'GemmaModel=>LlamaModel')";
  DOCTEST_CHECK(std::count(report.notes.begin(), report.notes.end(), note) == 1);
  DOCTEST_CHECK(contains(report.text(), note));
  // With the rename, the roots are one: no such note (the two models still differ in their layers).
  tracetorch::DiffOptions options;
  options.renames.push_back(tracetorch::PathRename::parse("GemmaModel=>LlamaModel"));
  const auto renamed = tracetorch::diff_traces(gemma, tiny() / "trace_repr", options);
  DOCTEST_CHECK(std::none_of(renamed.notes.begin(), renamed.notes.end(),
                             [](const std::string& n) { return n.starts_with("the roots differ"); }));
  // The same model: no such note either.
  const auto same = tracetorch::diff_traces(tiny() / "trace_repr", tiny() / "trace_repr");
  DOCTEST_CHECK(std::none_of(same.notes.begin(), same.notes.end(),
                             [](const std::string& n) { return n.starts_with("the roots differ"); }));
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

}  // namespace diff_test
