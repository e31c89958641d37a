// tracetorch/debugger.hpp: the model addition debugger against the Python reference traces, and
// what a scope does (threads, nesting, grad mode, errors). Its parts have files of their own:
// test_debugger_repeated_tensors.cpp, test_debugger_trace_files.cpp (reuse_previous_files),
// test_debugger_tensor_stats.cpp, test_debugger_forward_memory.cpp and test_debugger_bytes.cpp.

#include <doctest/doctest.h>

#include <tracetorch/diff.hpp>
#include <tracetorch/tracetorch.hpp>

#include "debugger_helpers.hpp"
#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>

namespace {

using tracetorch_test::read_file;
using tracetorch_test::module_paths;
using tracetorch_test::read_json;
using tracetorch_test::TempDir;
using tracetorch_test::tiny_llama_dir;
using tracetorch_test::make_tiny_llama;
using tracetorch_test::tiny_input_ids;

/// All numbers printed in a string ("tensor(-5.1862e-03)", a line of a printed tensor).
std::vector<double> numbers_in(const std::string& text) {
  static const std::regex number(R"([-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan))");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) {
    const std::string token = it->str();
    if (token.find("nan") != std::string::npos) {
      out.push_back(std::nan(""));
    } else if (token.find("inf") != std::string::npos) {
      out.push_back(token[0] == '-' ? -INFINITY : INFINITY);
    } else {
      out.push_back(std::stod(token));
    }
  }
  return out;
}

bool close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= 2e-4 + 2e-3 * std::abs(b);  // 4 printed significant digits
}

/// Compares a trace with the reference: identical keys, order, paths, shapes, dtypes, integer
/// values and file references; printed float values equal within their printed precision.
void expect_same_trace(const boost::json::value& ours, const boost::json::value& ref, const std::string& where,
                       bool float_tensor = false) {
  DOCTEST_INFO("at " << where);
  DOCTEST_REQUIRE(ours.kind() == ref.kind());
  if (ref.is_object()) {
    const auto& o = ours.as_object();
    const auto& r = ref.as_object();
    std::vector<std::string> ours_keys, ref_keys;
    for (const auto& e : o) ours_keys.emplace_back(e.key());
    for (const auto& e : r) ref_keys.emplace_back(e.key());
    DOCTEST_REQUIRE(ours_keys == ref_keys);
    bool is_float = float_tensor;
    if (const auto* dtype = r.if_contains("dtype"); dtype && dtype->is_string()) {
      is_float = dtype->as_string() == "torch.float32" || dtype->as_string() == "torch.float16" ||
                 dtype->as_string() == "torch.bfloat16";
    }
    std::string path = where;
    if (const auto* module_path = r.if_contains("module_path")) path = std::string(module_path->as_string());
    for (const auto& e : r) expect_same_trace(o.at(e.key()), e.value(), path + "." + std::string(e.key()), is_float);
  } else if (ref.is_array()) {
    DOCTEST_REQUIRE(ours.as_array().size() == ref.as_array().size());
    for (std::size_t i = 0; i < ref.as_array().size(); ++i) {
      expect_same_trace(ours.as_array()[i], ref.as_array()[i], where + "[" + std::to_string(i) + "]", float_tensor);
    }
  } else if (ref.is_string() && float_tensor && ref.as_string().find("./") != 0) {
    const std::string a(ours.as_string()), b(ref.as_string());
    const auto x = numbers_in(a), y = numbers_in(b);
    DOCTEST_REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      DOCTEST_INFO(a << " vs " << b);
      DOCTEST_CHECK(close(x[i], y[i]));
    }
  } else {
    DOCTEST_CHECK(ours == ref);
  }
}

}  // namespace

DOCTEST_TEST_SUITE("debugger") {

DOCTEST_TEST_CASE("a traced module called through its Impl is named by modules_not_called, not lost silently") {
  struct LeafImpl : torch::nn::Module {
    torch::Tensor forward(const torch::Tensor& x) { return x + 1; }
  };
  TRACETORCH_TRACEABLE_IMPL(Leaf, LeafImpl);
  struct BypassImpl : torch::nn::Module {
    BypassImpl() {
      traced = register_module("traced", Leaf());
      bypassed = register_module("bypassed", Leaf());
    }
    torch::Tensor forward(const torch::Tensor& x) { return static_cast<LeafImpl&>(*bypassed).forward(traced(x)); }
    Leaf traced{nullptr}, bypassed{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Bypass, BypassImpl);
  Bypass model;
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
  DOCTEST_CHECK(guard.modules_not_called().empty());  // nothing traced yet
  model(torch::ones({1}));
  DOCTEST_CHECK(guard.modules_not_called() == std::vector<std::string>{"Bypass.bypassed"});
}


DOCTEST_TEST_CASE("the tiny Llama trace matches the Python reference, use_repr=true") {
  auto model = make_tiny_llama();
  const auto ids = tiny_input_ids();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    model({.input_ids = ids});
    DOCTEST_CHECK(guard.modules_not_called().empty());  // every module of the port ran traced
  }
  const auto ref_full = read_json(tiny_llama_dir() / "trace_repr" / "LlamaModel_debug_tree_FULL_TENSORS.json");
  const auto ours_full = read_json(dir / "LlamaModel_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(module_paths(ours_full) == module_paths(ref_full));
  expect_same_trace(ours_full, ref_full, "root");
  expect_same_trace(read_json(dir / "LlamaModel_debug_tree_SUMMARY.json"),
                    read_json(tiny_llama_dir() / "trace_repr" / "LlamaModel_debug_tree_SUMMARY.json"), "summary");
  // The integer input ids print exactly as Python prints them.
  DOCTEST_CHECK(ours_full.at("inputs").at("kwargs").at("input_ids").at("value") ==
                ref_full.at("inputs").at("kwargs").at("input_ids").at("value"));
}

DOCTEST_TEST_CASE("the written JSON is byte-for-byte Python's json.dump(indent=2) layout") {
  auto model = make_tiny_llama();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    model({.input_ids = tiny_input_ids()});
  }
  // Re-serialising the reference with our writer reproduces the reference file exactly.
  for (const char* name : {"LlamaModel_debug_tree_SUMMARY.json", "LlamaModel_debug_tree_FULL_TENSORS.json"}) {
    const std::string ref_text = read_file(tiny_llama_dir() / "trace_repr" / name);
    std::string rewritten;
    tracetorch::detail::append_python_json(rewritten, boost::json::parse(ref_text), 0, false);
    DOCTEST_CHECK(rewritten == ref_text);
    // And our own file is in the same layout: parse + rewrite is the identity.
    const std::string ours = read_file(dir / name);
    std::string ours_rewritten;
    tracetorch::detail::append_python_json(ours_rewritten, boost::json::parse(ours), 0, false);
    DOCTEST_CHECK(ours_rewritten == ours);
  }
}

DOCTEST_TEST_CASE("use_repr=false writes transformers' file names and the same tensors") {
  auto model = make_tiny_llama();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(
        model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = false});
    model({.input_ids = tiny_input_ids()});
  }
  const auto ref_dir = tiny_llama_dir() / "trace_st";
  std::set<std::string> ref_files, our_files;
  for (const auto& e : std::filesystem::directory_iterator(ref_dir)) ref_files.insert(e.path().filename().string());
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) our_files.insert(e.path().filename().string());
  // The one expected difference: the reference model (llama_ref.py) returns a bare tensor, the
  // port returns transformers' BaseModelOutputWithPast, so its root output file is keyed by field.
  const auto our_name = [](const std::string& name) {
    return name == "LlamaModel_outputs.safetensors" ? std::string("LlamaModel_outputs_last_hidden_state.safetensors") : name;
  };
  std::set<std::string> expected_files;
  for (const auto& name : ref_files) expected_files.insert(our_name(name));
  DOCTEST_CHECK(our_files == expected_files);
  std::size_t compared = 0;
  for (const auto& name : ref_files) {
    if (name.ends_with(".json")) continue;
    DOCTEST_INFO(name);
    const auto ours = tracetorch::safetensors::load_single(dir / our_name(name));
    const auto ref = tracetorch::safetensors::load_single(ref_dir / name);
    DOCTEST_REQUIRE((ours.sizes() == ref.sizes()));
    DOCTEST_REQUIRE((ours.scalar_type() == ref.scalar_type()));
    if (ref.is_floating_point()) {
      DOCTEST_CHECK(torch::allclose(ours, ref, /*rtol=*/0, /*atol=*/1e-5, /*equal_nan=*/true));
    } else {
      DOCTEST_CHECK(torch::equal(ours, ref));
    }
    ++compared;
  }
  DOCTEST_CHECK(compared == 142);
  expect_same_trace(read_json(dir / "LlamaModel_debug_tree_FULL_TENSORS.json"),
                    read_json(ref_dir / "LlamaModel_debug_tree_FULL_TENSORS.json"), "root");
}

DOCTEST_TEST_CASE("do_prune_layers keeps the first and last layer block") {
  auto model = make_tiny_llama();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model({.input_ids = tiny_input_ids()});
  }
  const auto summary = read_json(dir / "LlamaModel_debug_tree_SUMMARY.json");
  std::vector<std::string> top;
  for (const auto& child : summary.at("children").as_array()) top.emplace_back(child.at("module_path").as_string());
  DOCTEST_CHECK(top == std::vector<std::string>{"LlamaModel.embed_tokens", "LlamaModel.rotary_emb",
                                                "LlamaModel.layers.0", "LlamaModel.layers.3", "LlamaModel.norm"});
}

DOCTEST_TEST_CASE("the root keeps module_path, inputs with args and kwargs, children - leaves have outputs") {
  auto model = make_tiny_llama();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model({.input_ids = tiny_input_ids()});
  }
  const auto summary = read_json(dir / "LlamaModel_debug_tree_SUMMARY.json").as_object();
  std::vector<std::string> keys;
  for (const auto& e : summary) keys.emplace_back(e.key());
  DOCTEST_CHECK(keys == std::vector<std::string>{"module_path", "inputs", "children"});
  DOCTEST_CHECK(summary.at("inputs").as_object().contains("kwargs"));
  // Found by path, not position: the layer has children, so no outputs; upstream passes it the
  // mask and positions by keyword.
  const boost::json::object* layer0 = nullptr;
  for (const auto& child : summary.at("children").as_array()) {
    if (child.as_object().at("module_path").as_string() == "LlamaModel.layers.0") layer0 = &child.as_object();
  }
  DOCTEST_REQUIRE(layer0 != nullptr);
  DOCTEST_CHECK(!layer0->contains("outputs"));
  DOCTEST_CHECK(layer0->at("inputs").as_object().contains("kwargs"));
  DOCTEST_CHECK(summary.at("children").as_array().at(0).as_object().contains("outputs"));
}

DOCTEST_TEST_CASE("the forward runs under no-grad inside the scope and grad mode is restored after") {
  struct ProbeImpl : torch::nn::Module {
    torch::Tensor forward(torch::Tensor x) {
      grad_mode_inside = torch::GradMode::is_enabled();
      return x * 2;
    }
    bool grad_mode_inside = true;
  };
  TRACETORCH_TRACEABLE_IMPL(Probe, ProbeImpl);
  Probe probe;
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(probe, {.debug_path = dir.path()});
    probe(torch::ones({2}));
    DOCTEST_CHECK_FALSE(probe->grad_mode_inside);
    DOCTEST_CHECK(torch::GradMode::is_enabled());
  }
  probe(torch::ones({2}));
  DOCTEST_CHECK(probe->grad_mode_inside);
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 2);
}

DOCTEST_TEST_CASE("a forward that throws leaves no files, restores state, and the next trace works") {
  struct FlakyImpl : torch::nn::Module {
    FlakyImpl() { inner = register_module("inner", tracetorch::nn::Linear(3, 3)); }
    torch::Tensor forward(torch::Tensor x) {
      auto y = inner(x);
      if (fail) throw std::runtime_error("boom");
      return y;
    }
    tracetorch::nn::Linear inner{nullptr};
    bool fail = true;
  };
  TRACETORCH_TRACEABLE_IMPL(Flaky, FlakyImpl);
  Flaky model;
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
  DOCTEST_CHECK_THROWS_WITH_AS(model(torch::ones({1, 3})), "boom", std::runtime_error);
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  model->fail = false;
  model(torch::ones({1, 3}));
  const auto summary = read_json(dir / "Flaky_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(module_paths(summary) == std::vector<std::string>{"Flaky", "Flaky.inner"});
}

DOCTEST_TEST_CASE("a module called twice gives one node per call and distinct tensor files") {
  struct TwiceImpl : torch::nn::Module {
    TwiceImpl() { inner = register_module("inner", tracetorch::nn::Linear(2, 2)); }
    torch::Tensor forward(torch::Tensor x) { return inner(inner(x)); }
    tracetorch::nn::Linear inner{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Twice, TwiceImpl);
  Twice model;
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
    model(torch::ones({1, 2}));
  }
  const auto full = read_json(dir / "Twice_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Twice", "Twice.inner", "Twice.inner"});
  const auto& calls = full.at("children").as_array();
  DOCTEST_CHECK(calls[0].at("outputs").at("value") == "./Twice.inner_outputs.safetensors");
  DOCTEST_CHECK(calls[1].at("outputs").at("value") == "./Twice.inner_call2_outputs.safetensors");
  DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(dir / "Twice.inner_call2_inputs_args_0.safetensors"),
                             tracetorch::safetensors::load_single(dir / "Twice.inner_outputs.safetensors")));
}

DOCTEST_TEST_CASE("repeated_call_files = shared: transformers' names, the last call's file wins, and the diff reads it") {
  struct SharedImpl : torch::nn::Module {
    SharedImpl() { inner = register_module("inner", tracetorch::nn::Linear(2, 2)); }
    torch::Tensor forward(torch::Tensor x) { return inner(inner(x)); }
    tracetorch::nn::Linear inner{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Shared, SharedImpl);
  Shared model;
  TempDir dir;
  for (const auto naming : {tracetorch::RepeatedCallFiles::shared, tracetorch::RepeatedCallFiles::numbered}) {
    const auto where = dir / (naming == tracetorch::RepeatedCallFiles::shared ? "shared" : "numbered");
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = where, .use_repr = false, .repeated_call_files = naming});
    model(torch::ones({1, 2}));
  }
  const auto full = read_json(dir / "shared" / "Shared_debug_tree_FULL_TENSORS.json");
  const auto& calls = full.at("children").as_array();
  DOCTEST_CHECK(calls[0].at("outputs").at("value") == "./Shared.inner_outputs.safetensors");
  DOCTEST_CHECK(calls[1].at("outputs").at("value") == "./Shared.inner_outputs.safetensors");
  DOCTEST_CHECK(!std::filesystem::exists(dir / "shared" / "Shared.inner_call2_outputs.safetensors"));
  // The file holds the second call's value, as Python's debugger leaves it.
  DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(dir / "shared" / "Shared.inner_outputs.safetensors"),
                             tracetorch::safetensors::load_single(dir / "numbered" / "Shared.inner_call2_outputs.safetensors")));
  // Against the numbered trace: call 2 compared, call 1's values overwritten in the reference, no difference.
  const auto report = tracetorch::diff_traces(dir / "shared", dir / "numbered");
  DOCTEST_INFO(report.text(true));
  DOCTEST_CHECK(report.within_tolerance());
  DOCTEST_CHECK(report.counts().overwritten_in_reference == 2);
  DOCTEST_CHECK(report.counts().total() == 0);
}

DOCTEST_TEST_CASE("only rank 0 records") {
  auto model = make_tiny_llama();
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .rank = 1});
    model({.input_ids = tiny_input_ids()});
  }
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  ::setenv("RANK", "2", 1);
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model({.input_ids = tiny_input_ids()});
  }
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  ::setenv("RANK", "0", 1);
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model({.input_ids = tiny_input_ids()});
  }
  ::unsetenv("RANK");
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 2);
}

DOCTEST_TEST_CASE("a debug_path that cannot be created or written is a clear error") {
  auto model = make_tiny_llama();
  TempDir dir;
  { std::ofstream(dir / "a_file") << "x"; }
  DOCTEST_CHECK_THROWS_WITH_AS(
      (void)tracetorch::model_addition_debugger(model, {.debug_path = dir / "a_file" / "sub"}),
      doctest::Contains("cannot create debug_path"), tracetorch::Error);
  if (::geteuid() != 0) {  // root writes anywhere
    std::filesystem::create_directories(dir / "ro");
    std::filesystem::permissions(dir / "ro", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    DOCTEST_CHECK_THROWS_AS((void)tracetorch::model_addition_debugger(model, {.debug_path = dir / "ro"}), tracetorch::Error);
  }
}

DOCTEST_TEST_CASE("after the scope ends nothing is attached and no trace is written") {
  auto model = make_tiny_llama();
  TempDir dir;
  { auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()}); }
  for (const auto& module : model->modules(/*include_self=*/true)) {
    if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      DOCTEST_CHECK(traced->attachments_.load() == nullptr);
    }
  }
  model({.input_ids = tiny_input_ids()});
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
}

DOCTEST_TEST_CASE("nested scopes on one model: the inner one records, the outer one resumes after") {
  auto model = make_tiny_llama();
  TempDir outer_dir, inner_dir;
  auto outer = tracetorch::model_addition_debugger(model, {.debug_path = outer_dir.path()});
  {
    auto inner = tracetorch::model_addition_debugger(model, {.debug_path = inner_dir.path()});
    model({.input_ids = tiny_input_ids()});
    DOCTEST_CHECK(torch::GradMode::is_enabled());  // each scope restored what it found, in order
  }
  DOCTEST_CHECK(tracetorch_test::count_files(inner_dir.path()) == 2);
  DOCTEST_CHECK(tracetorch_test::count_files(outer_dir.path()) == 2);  // both observed that forward
  std::filesystem::remove_all(outer_dir.path());
  std::filesystem::create_directories(outer_dir.path());
  model({.input_ids = tiny_input_ids()});
  DOCTEST_CHECK(tracetorch_test::count_files(outer_dir.path()) == 2);
}

}  // DOCTEST_TEST_SUITE

DOCTEST_TEST_CASE("debug_io=true in a call's options traces that call, as upstream's debug_io keywords") {
  auto model = make_tiny_llama();
  TempDir dir;
  const auto traced = model({.input_ids = tiny_input_ids()}, {.debug_io = true, .debug_io_dir = (dir / "full").string()});
  const auto summary = read_json(dir / "full" / "LlamaModel_debug_tree_SUMMARY.json");
  std::vector<std::string> keys;
  for (const auto& entry : summary.at("inputs").at("kwargs").as_object()) keys.emplace_back(entry.key());
  DOCTEST_CHECK(keys == std::vector<std::string>{"input_ids", "debug_io", "debug_io_dir"});
  const auto paths = module_paths(summary);
  DOCTEST_CHECK(std::find(paths.begin(), paths.end(), "LlamaModel.layers.1") != paths.end());  // not pruned by default
  DOCTEST_CHECK(torch::equal(traced.last_hidden_state, model({.input_ids = tiny_input_ids()}).last_hidden_state));
  // The debugger is gone after the call: nothing stays attached.
  for (const auto& module : model->modules(/*include_self=*/true)) {
    if (auto* traced_module = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      DOCTEST_CHECK(traced_module->attachments_.load() == nullptr);
    }
  }
  model({.input_ids = tiny_input_ids()}, {.debug_io = true, .debug_io_dir = (dir / "pruned").string(), .prune_layers = true});
  const auto pruned = module_paths(read_json(dir / "pruned" / "LlamaModel_debug_tree_SUMMARY.json"));
  DOCTEST_CHECK(std::find(pruned.begin(), pruned.end(), "LlamaModel.layers.1") == pruned.end());
  DOCTEST_CHECK(std::find(pruned.begin(), pruned.end(), "LlamaModel.layers.3") != pruned.end());
}
