// tracetorch/debugger.hpp: the model addition debugger against the Python reference traces.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <set>

namespace {

using tracetorch_test::read_file;
using tracetorch_test::module_paths;
using tracetorch_test::read_json;
using tracetorch_test::TempDir;
using tracetorch_test::tiny_llama_dir;

llama::LlamaModel make_tiny_llama() {
  const auto config = llama::LlamaConfig::from_json_file(tiny_llama_dir() / "config.json");
  llama::LlamaModel model(config);
  model->eval();
  llama::load_state_dict(*model, tiny_llama_dir() / "model.safetensors");
  return model;
}

torch::Tensor tiny_input_ids() { return tracetorch::safetensors::load(tiny_llama_dir() / "input_ids.safetensors").at("input_ids"); }

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

DOCTEST_TEST_CASE("the root keeps module_path, inputs with args and kwargs, children; leaves have outputs") {
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

ino_t inode_of(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw std::runtime_error("cannot stat " + path.string());
  return info.st_ino;
}

DOCTEST_TEST_CASE("reuse_repeated_tensors: the trace is byte for byte the one written without it") {
  auto model = make_tiny_llama();
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    TempDir reused, apart;
    for (const bool reuse : {true, false}) {
      auto guard = tracetorch::model_addition_debugger(
          model, {.debug_path = reuse ? reused.path() : apart.path(), .do_prune_layers = false, .use_repr = use_repr,
                  .reuse_repeated_tensors = reuse});
      model({.input_ids = tiny_input_ids()});
    }
    const auto with = tracetorch_test::snapshot(reused.path()), without = tracetorch_test::snapshot(apart.path());
    DOCTEST_CHECK(with.size() == (use_repr ? 2u : 144u));
    DOCTEST_CHECK(with == without);
    if (!use_repr) {
      // The normed hidden states go to self_attn, q_proj, k_proj and v_proj: one file, five names.
      const auto first = inode_of(reused / "LlamaModel.layers.0.input_layernorm_outputs.safetensors");
      for (const char* name : {"self_attn_inputs_kwargs_hidden_states", "self_attn.q_proj_inputs_args_0", "self_attn.k_proj_inputs_args_0",
                               "self_attn.v_proj_inputs_args_0"}) {
        DOCTEST_INFO(name);
        DOCTEST_CHECK(inode_of(reused / ("LlamaModel.layers.0." + std::string(name) + ".safetensors")) == first);
      }
      DOCTEST_CHECK(inode_of(apart / "LlamaModel.layers.0.self_attn_inputs_kwargs_hidden_states.safetensors") !=
                    inode_of(apart / "LlamaModel.layers.0.input_layernorm_outputs.safetensors"));
    }
  }
}

DOCTEST_TEST_CASE("reuse_repeated_tensors: a tensor written between two calls is recorded again") {
  // Written in place (LibTorch counts it), behind LibTorch's back through data_ptr() (it does
  // not: the content hash sees it), or not at all: only the last is reused.
  struct RewriteImpl : torch::nn::Module {
    RewriteImpl() {
      first = register_module("first", tracetorch::nn::Linear(4, 4));
      second = register_module("second", tracetorch::nn::Tanh());
    }
    torch::Tensor forward(torch::Tensor x) {
      auto y = first(x);
      if (how == 1) y.add_(1);
      if (how == 2) y.data_ptr<float>()[0] = 42;
      return second(y);
    }
    tracetorch::nn::Linear first{nullptr};
    tracetorch::nn::Tanh second{nullptr};
    int how = 0;
  };
  TRACETORCH_TRACEABLE_IMPL(Rewrite, RewriteImpl);
  Rewrite model;
  const auto x = torch::randn({2, 4});
  for (const int how : {0, 1, 2}) {
    DOCTEST_INFO("how " << how);
    model->how = how;
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
      model(x);
    }
    const auto written = dir / "Rewrite.first_outputs.safetensors";
    const auto read = dir / "Rewrite.second_inputs_args_0.safetensors";
    const auto expected = torch::nn::functional::linear(x, model->first->weight, model->first->bias);
    DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(written), expected));
    const auto seen = tracetorch::safetensors::load_single(read);
    if (how == 0) DOCTEST_CHECK(torch::equal(seen, expected));
    if (how == 1) DOCTEST_CHECK(torch::equal(seen, expected + 1));
    if (how == 2) DOCTEST_CHECK(seen[0][0].item<float>() == 42);
    DOCTEST_CHECK((inode_of(read) == inode_of(written)) == (how == 0));
  }
}

DOCTEST_TEST_CASE("reuse_repeated_tensors: the file of a call that failed is not reused") {
  // `failing` is the first to record `y`, then throws; the model catches it and passes `y` on.
  struct ThrowerImpl : torch::nn::Module {
    torch::Tensor forward(torch::Tensor) { throw std::runtime_error("no"); }
  };
  TRACETORCH_TRACEABLE_IMPL(Thrower, ThrowerImpl);
  struct RecoverImpl : torch::nn::Module {
    RecoverImpl() {
      make = register_module("make", tracetorch::nn::Linear(3, 3));
      failing = register_module("failing", Thrower());
      after = register_module("after", tracetorch::nn::Tanh());
    }
    torch::Tensor forward(torch::Tensor x) {
      auto y = x * 2;  // not a module's output: first recorded by `failing`
      try {
        failing(y);
      } catch (const std::runtime_error&) {
      }
      after(y);
      return after(make(x));  // make's output is recorded again: still a hard link
    }
    tracetorch::nn::Linear make{nullptr};
    Thrower failing{nullptr};
    tracetorch::nn::Tanh after{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Recover, RecoverImpl);
  Recover model;
  TempDir dir;
  const auto x = torch::randn({1, 3});
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
    model(x);
  }
  DOCTEST_CHECK(!std::filesystem::exists(dir / "Recover.failing_inputs_args_0.safetensors"));
  DOCTEST_CHECK(torch::equal(tracetorch::safetensors::load_single(dir / "Recover.after_inputs_args_0.safetensors"), x * 2));
  const auto full = read_json(dir / "Recover_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Recover", "Recover.after", "Recover.make", "Recover.after"});
  DOCTEST_CHECK(inode_of(dir / "Recover.after_call2_inputs_args_0.safetensors") == inode_of(dir / "Recover.make_outputs.safetensors"));
}

/// The hidden directories of reuse_previous_files in `dir`.
std::vector<std::string> spare_directories(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(".tracetorch-spares-")) out.push_back(name);
  }
  return out;
}

/// The tensor files of a trace with one link, by name.
std::map<std::string, ino_t> unlinked_tensor_files(const std::filesystem::path& dir) {
  std::map<std::string, ino_t> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    struct stat info {};
    const auto name = entry.path().filename().string();
    if (name.ends_with(".safetensors") && ::lstat(entry.path().c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        info.st_nlink == 1) {
      out[name] = info.st_ino;
    }
  }
  return out;
}

/// Traces the tiny Llama on `ids` into `dir` with use_repr=false, in a scope of its own.
void trace_files(llama::LlamaModel& model, const std::filesystem::path& dir, const torch::Tensor& ids, bool reuse_previous) {
  auto guard = tracetorch::model_addition_debugger(
      model, {.debug_path = dir, .do_prune_layers = false, .use_repr = false, .reuse_previous_files = reuse_previous});
  model({.input_ids = ids});
}

/// Three different inputs of the tiny Llama.
std::vector<torch::Tensor> three_inputs() {
  const auto ids = tiny_input_ids();
  return {ids, ids.flip(1).contiguous(), ids.roll(3, 1).contiguous()};
}

DOCTEST_TEST_CASE("reuse_previous_files: later traces write over the files they replace and read as fresh ones") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir reused, fresh;
  trace_files(model, reused.path(), inputs[0], true);
  DOCTEST_CHECK(spare_directories(reused.path()).empty());  // a first trace into a directory keeps nothing
  const auto first = unlinked_tensor_files(reused.path());
  DOCTEST_CHECK(first.size() > 30);

  trace_files(model, reused.path(), inputs[1], true);
  const auto spares = spare_directories(reused.path());
  DOCTEST_REQUIRE(spares.size() == 1);
  DOCTEST_CHECK(tracetorch_test::count_files(reused / spares[0]) == 142);  // the first trace's tensor files

  trace_files(model, reused.path(), inputs[2], true);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(spare_directories(fresh.path()).empty());
  DOCTEST_CHECK(tracetorch_test::snapshot(reused.path()) == tracetorch_test::snapshot(fresh.path()));
  // The third trace wrote over the first one's files: those of one link have their inodes again.
  std::size_t written_over = 0;
  for (const auto& [name, inode] : first) written_over += inode_of(reused / name) == inode ? 1 : 0;
  DOCTEST_CHECK(written_over == first.size());
  DOCTEST_CHECK(tracetorch_test::count_files(reused / spares[0]) == 142);  // the second trace's
}

DOCTEST_TEST_CASE("reuse_previous_files: a replaced file still open or linked elsewhere is never written over") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, elsewhere, fresh;
  trace_files(model, dir.path(), inputs[0], true);
  const auto files = unlinked_tensor_files(dir.path());
  DOCTEST_REQUIRE(files.size() >= 2);
  const std::string open_name = files.begin()->first, linked_name = std::next(files.begin())->first;
  const std::string open_before = read_file(dir / open_name), linked_before = read_file(dir / linked_name);
  std::ifstream reader(dir / open_name, std::ios::binary);  // a reader that keeps the file open
  DOCTEST_REQUIRE(::link((dir / linked_name).c_str(), (elsewhere / "kept.safetensors").c_str()) == 0);

  // The second trace keeps the first one's files as spares; the third would write over them.
  trace_files(model, dir.path(), inputs[1], true);
  trace_files(model, dir.path(), inputs[2], true);
  const std::string through_reader{std::istreambuf_iterator<char>(reader), std::istreambuf_iterator<char>()};
  DOCTEST_CHECK(through_reader == open_before);
  DOCTEST_CHECK(read_file(elsewhere / "kept.safetensors") == linked_before);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(read_file(dir / open_name) == read_file(fresh / open_name));
  DOCTEST_CHECK(read_file(dir / linked_name) == read_file(fresh / linked_name));
  DOCTEST_CHECK(read_file(dir / open_name) != open_before);
}

DOCTEST_TEST_CASE("reuse_previous_files: a debug_path removed between traces is written anew") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir, fresh;
  trace_files(model, dir.path(), inputs[0], true);
  trace_files(model, dir.path(), inputs[1], true);  // spares now
  std::filesystem::remove_all(dir.path());
  std::filesystem::create_directories(dir.path());
  trace_files(model, dir.path(), inputs[2], true);
  trace_files(model, fresh.path(), inputs[2], false);
  DOCTEST_CHECK(tracetorch_test::snapshot(dir.path()) == tracetorch_test::snapshot(fresh.path()));
}

DOCTEST_TEST_CASE("reuse_previous_files=false: the replaced files are deleted at once") {
  auto model = make_tiny_llama();
  const auto inputs = three_inputs();
  TempDir dir;
  for (const auto& ids : inputs) trace_files(model, dir.path(), ids, false);
  DOCTEST_CHECK(spare_directories(dir.path()).empty());
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 144);
}

DOCTEST_TEST_CASE("python json layout: escapes, empty containers, floats") {
  std::string out;
  boost::json::object object;
  object["text"] = "a\"b\\c\nd\te\x01\x7f" "\xc3\xa9\xf0\x9f\x98\x80";
  object["empty_list"] = boost::json::array();
  object["empty_dict"] = boost::json::object();
  object["list"] = boost::json::array{1, 2.5, nullptr, true};
  tracetorch::detail::append_python_json(out, object, 0, false);
  DOCTEST_CHECK(out ==
                "{\n  \"text\": \"a\\\"b\\\\c\\nd\\te\\u0001\\u007f\\u00e9\\ud83d\\ude00\",\n"
                "  \"empty_list\": [],\n  \"empty_dict\": {},\n  \"list\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
}

}  // DOCTEST_TEST_SUITE

DOCTEST_TEST_CASE("statistics: the float32 fast path prints what LibTorch's mean/std/min/max print") {
  // The fast path (contiguous float32 on the CPU) computes std's sum and min/max its own way;
  // the general path calls the LibTorch functions Python's debugger calls. Both must print alike.
  const auto general = [](const torch::Tensor& t) {
    boost::json::object record;
    record["mean"] = tracetorch::python_repr(t.mean());
    record["std"] = tracetorch::python_repr(t.std());
    record["min"] = tracetorch::python_repr(t.min());
    record["max"] = tracetorch::python_repr(t.max());
    return record;
  };
  const auto fast = [](const torch::Tensor& t) {
    boost::json::object record;
    tracetorch::detail::add_statistics(record, t);
    return record;
  };
  torch::manual_seed(11);
  std::vector<torch::Tensor> cases;
  for (int i = 0; i < 600; ++i) {
    const std::int64_t n = 1 + (i * 7919) % (i % 3 == 0 ? 50 : 300'000);
    cases.push_back(torch::randn({n}) * std::pow(10.0, i % 9 - 4) + (i % 5) * 0.25);
  }
  cases.push_back(torch::tensor({1.5f}));                       // one element: std nan
  cases.push_back(torch::zeros({7}));                           // all zero: min/max 0.
  cases.push_back(torch::tensor({0.0f, -0.0f, 1.0f}));          // signed zeros
  cases.push_back(torch::tensor({-0.0f, 0.0f, -1.0f}));
  cases.push_back(torch::tensor({1.0f, NAN, 2.0f}));            // NaN propagates
  cases.push_back(torch::tensor({1.0f, INFINITY, -2.0f}));      // inf: std nan
  cases.push_back(torch::tensor({-INFINITY, -INFINITY}));
  cases.push_back(torch::randn({4, 30, 64}));                   // multi-dimensional
  cases.push_back(torch::full({1000}, 3e38f));                  // near float's limit
  cases.push_back(torch::tensor({NAN}));                        // NaN alone, first, in the tail
  cases.push_back(torch::cat({torch::tensor({NAN}), torch::randn({40})}));
  cases.push_back(torch::cat({torch::randn({40}), torch::tensor({NAN, 1.0f})}));
  cases.push_back(torch::cat({torch::randn({16}), torch::tensor({-INFINITY, NAN})}));
  // More than 2^24 values: the count is no longer exact as a float divisor.
  cases.push_back(torch::rand({(1 << 24) + 3}) + 0.5);
  int compared = 0;
  for (const auto& t : cases) {
    DOCTEST_INFO("numel " << t.numel() << ", first " << t.flatten()[0].item<float>());
    DOCTEST_CHECK(fast(t) == general(t));
    ++compared;
  }
  DOCTEST_CHECK(compared == 614);
  // Non-contiguous, float16 and empty tensors take the general path, as before.
  const auto transposed = torch::randn({8, 5}).t();
  DOCTEST_CHECK(fast(transposed) == general(transposed));
  boost::json::object empty;
  tracetorch::detail::add_statistics(empty, torch::empty({0}));
  DOCTEST_CHECK(empty.contains("mean"));
  DOCTEST_CHECK(!empty.contains("min"));
}

DOCTEST_TEST_CASE("forward memory: the arena reuses its blocks after rewind and in the next session") {
  using tracetorch::detail::ForwardArena;
  // Sizes up to one larger than a block, at three alignments.
  const std::size_t sizes[] = {1, 7, 64, 4096, 100000, 3u << 20, 24, 700000, 700000};
  const auto take_all = [&](ForwardArena& arena) {
    std::vector<std::pair<std::byte*, std::size_t>> taken;
    for (const std::size_t size : sizes) {
      for (const std::size_t alignment : {1, 8, 64}) {
        auto* p = static_cast<std::byte*>(arena.allocate(size, alignment));
        DOCTEST_CHECK(reinterpret_cast<std::uintptr_t>(p) % alignment == 0);
        std::memset(p, 0xAB, size);  // mapped and writable
        taken.emplace_back(p, size);
      }
    }
    return taken;
  };
  std::vector<std::pair<std::byte*, std::size_t>> first;
  {
    ForwardArena arena;
    first = take_all(arena);
    auto sorted = first;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i) DOCTEST_CHECK(sorted[i - 1].first + sorted[i - 1].second <= sorted[i].first);
    const std::size_t capacity = arena.capacity();
    DOCTEST_CHECK(capacity >= (3u << 20));
    arena.rewind();
#ifdef TRACETORCH_DETAIL_ASAN
    // A use after the rewind would be reported.
    for (const auto& [p, size] : first) DOCTEST_CHECK(__asan_address_is_poisoned(p));
#endif
    DOCTEST_CHECK(take_all(arena) == first);  // the same memory, handed out again
    DOCTEST_CHECK(arena.capacity() == capacity);
  }
  // Its blocks went back to the process: the next session's arena starts in one of them.
  ForwardArena next;
  auto* p = static_cast<std::byte*>(next.allocate(1, 1));
  DOCTEST_CHECK(std::any_of(first.begin(), first.end(), [&](const auto& taken) { return taken.first == p; }));
}

namespace {

std::size_t heap_peak = 0;  // of malloc's main heap, as seen by HeapChurn's layers

/// Makes a fresh 256 KiB activation from the previous one, as each layer of a model does.
struct ChurnLayerImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto y = x * 1.0001f;
    heap_peak = std::max(heap_peak, static_cast<std::size_t>(::mallinfo2().arena));
    return y;
  }
};
TRACETORCH_TRACEABLE_IMPL(ChurnLayer, ChurnLayerImpl);

struct HeapChurnImpl : torch::nn::Module {
  HeapChurnImpl() {
    for (int i = 0; i < 48; ++i) layers.push_back(register_module(std::to_string(i), ChurnLayer()));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& layer : layers) x = layer(x);  // the previous activation is freed here
    return x;
  }
  std::vector<ChurnLayer> layers;
};
TRACETORCH_TRACEABLE_IMPL(HeapChurn, HeapChurnImpl);

/// How far malloc's main heap grew during `forward` (bytes).
template <class Forward>
std::size_t heap_growth(Forward&& forward) {
  ::malloc_trim(0);
  const auto start = static_cast<std::size_t>(::mallinfo2().arena);
  heap_peak = start;
  forward();
  return heap_peak - start;
}

}  // namespace

DOCTEST_TEST_CASE("forward memory: a traced forward grows malloc's heap no more than an untraced one") {
  // What the trace keeps until the forward returns used to come from malloc's heap, between the
  // model's activations: it kept their holes from being reused, and the heap grew by about one
  // activation a call (12 MiB here; 400 MiB on seed 004's Llama).
  HeapChurn model;
  const auto x = torch::randn({64 * 1024});
  model(x);
  const std::size_t untraced = heap_growth([&] { model(x); });
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr << ", untraced growth " << untraced);
    TempDir dir;
    const auto trace = [&] {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = use_repr});
      model(x);
    };
    trace();  // the first trace into a directory; the second replaces it
    const std::size_t traced = heap_growth(trace);
    DOCTEST_CHECK(traced <= untraced + (2u << 20));
    DOCTEST_CHECK(read_json(dir / "HeapChurn_debug_tree_SUMMARY.json").at("children").as_array().size() == 48);
  }
}

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
