// Reliability of the model addition debugger (issue 8): tensors of every kind against Python's
// debugger (the recipes of tests/data/make_trace_kinds.py, byte for byte), the tensors it cannot
// trace or safetensors cannot hold, a large tensor. docs/reliability.md lists each case.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "reliability_helpers.hpp"

#include <sys/resource.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <string_view>

namespace reliability_test {

namespace {

/// Python's `Kinds` in tests/data/make_trace_kinds.py.
struct KindsImpl : torch::nn::Module {
  KindsImpl() { echo = register_module("echo", Echo()); }
  torch::Tensor forward(torch::Tensor x) { return echo(x); }
  Echo echo{nullptr};
};
TRACEABLE(Kinds);

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;  // no data (and data_ptr() may be null)
  const auto x = a.resolve_conj().resolve_neg().contiguous(), y = b.resolve_conj().resolve_neg().contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.numel()) * x.element_size()) == 0;
}

long peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// ---------------------------------------------------------------------------------------------
// Tensors of every kind: the recipes of tests/data/make_trace_kinds.py

double parse_value(const boost::json::value& v) {
  if (v.is_string()) {
    const auto s = v.as_string();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw std::runtime_error("unknown value " + std::string(s));
  }
  return v.to_number<double>();
}

/// build() of make_trace_kinds.py, op for op.
torch::Tensor make_tensor(const boost::json::value& recipe_value) {
  if (recipe_value.is_null()) return {};
  const auto& recipe = recipe_value.as_object();
  const auto dtype = dtype_named(recipe.at("dtype").as_string());
  torch::Tensor values;
  if (const auto* ramp = recipe.if_contains("ramp")) {
    const auto& r = ramp->as_array();
    values = torch::arange(r[0].to_number<std::int64_t>(), torch::kDouble) * r[1].to_number<double>() + r[2].to_number<double>();
  } else {
    std::vector<double> listed;
    for (const auto& v : recipe.at("list").as_array()) listed.push_back(parse_value(v));
    values = torch::tensor(listed, torch::kDouble);
  }
  torch::Tensor t;
  if (c10::isComplexType(dtype)) {
    t = torch::complex(values, values.flip(0) * -0.5).to(dtype);
  } else if (dtype == torch::kBool) {
    t = values != 0;
  } else {
    t = values.to(dtype);
  }
  t = t.reshape(int_list(recipe.at("shape")));
  for (const auto& op_value : recipe.at("ops").as_array()) {
    const auto& op = op_value.as_array();
    const auto name = op[0].as_string();
    if (name == "t") {
      t = t.t();
    } else if (name == "slice") {
      t = t.slice(op[1].to_number<std::int64_t>(), c10::nullopt, c10::nullopt, op[2].to_number<std::int64_t>());
    } else if (name == "expand") {
      t = t.expand(int_list(op[1]));
    } else if (name == "conj") {
      t = t.conj();
    } else if (name == "requires_grad") {
      t = t.requires_grad_();
    } else {
      throw std::runtime_error("unknown op " + std::string(name));
    }
  }
  return t;
}

/// Python's file text as tracetorch writes it. One difference on purpose: Python computes the
/// stats of the root's and its children's tensors with grad mode on, so a tensor that requires
/// grad gets `tensor(7.5000e-01, grad_fn=<MeanBackward0>)`; tracetorch traces under no-grad and
/// writes `tensor(7.5000e-01)` (docs/reliability.md).
std::string as_tracetorch_writes(std::string_view python_text) {
  static const std::regex grad_fn(R"re(, grad_fn=<\w+>\))re");
  return std::regex_replace(std::string(python_text), grad_fn, ")");
}

const boost::json::object& trace_kind_cases() {
  static const boost::json::value cases = read_json(data_dir() / "trace_kinds.json");
  return cases.at("cases").as_object();
}

}  // namespace

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// Tensors of every kind

DOCTEST_TEST_CASE("tensors of every kind: the use_repr trace is Python's, byte for byte") {
  std::size_t compared = 0;
  for (const auto& [name, case_value] : trace_kind_cases()) {
    const auto& c = case_value.as_object();
    if (!c.contains("repr")) continue;
    DOCTEST_INFO("case " << std::string_view(name));
    Kinds model;
    const auto input = make_tensor(c.at("recipe"));
    const auto files = trace_files(model, input, true);
    DOCTEST_CHECK(names_of(files) == std::set<std::string>{"Kinds_debug_tree_FULL_TENSORS.json", "Kinds_debug_tree_SUMMARY.json"});
    DOCTEST_CHECK(files.at("Kinds_debug_tree_FULL_TENSORS.json") == as_tracetorch_writes(c.at("repr").at("full").as_string()));
    DOCTEST_CHECK(files.at("Kinds_debug_tree_SUMMARY.json") == as_tracetorch_writes(c.at("repr").at("summary").as_string()));
    ++compared;
  }
  DOCTEST_CHECK(compared >= 30);
}

DOCTEST_TEST_CASE("tensors of every kind: use_repr=false writes Python's JSON and files") {
  std::size_t compared = 0;
  for (const auto& [name, case_value] : trace_kind_cases()) {
    const auto& c = case_value.as_object();
    if (!c.contains("safetensors")) continue;
    DOCTEST_INFO("case " << std::string_view(name));
    Kinds model;
    const auto input = make_tensor(c.at("recipe"));
    const auto files = trace_files(model, input, false);
    const auto& expected = c.at("safetensors").as_object();
    DOCTEST_CHECK(files.at("Kinds_debug_tree_FULL_TENSORS.json") == as_tracetorch_writes(expected.at("full").as_string()));
    std::set<std::string> expected_names{"Kinds_debug_tree_FULL_TENSORS.json", "Kinds_debug_tree_SUMMARY.json"};
    for (const auto& [file, content] : expected.at("files").as_object()) {
      expected_names.insert(std::string(file));
      DOCTEST_INFO("file " << std::string_view(file));
      DOCTEST_REQUIRE(files.contains(std::string(file)));
      const auto& ours = files.at(std::string(file));
      if (content.is_string()) {
        DOCTEST_CHECK(ours == from_hex(content.as_string()));
      } else {  // big: the size, and the tensor itself
        DOCTEST_CHECK(ours.size() == content.at("size").to_number<std::size_t>());
      }
      TempDir one;
      { std::ofstream(one / "t.safetensors", std::ios::binary) << ours; }
      DOCTEST_CHECK(same_bits(tracetorch::safetensors::load_single(one / "t.safetensors"), input.detach()));
    }
    DOCTEST_CHECK(names_of(files) == expected_names);
    ++compared;
  }
  DOCTEST_CHECK(compared >= 28);
}

DOCTEST_TEST_CASE("tensors Python's debugger cannot trace: empty float tensors have no min and max") {
  for (const char* name : {"empty_float32", "empty_float32_2x0"}) {
    DOCTEST_INFO(name);
    const auto& c = trace_kind_cases().at(name).as_object();
    DOCTEST_CHECK(std::string_view(c.at("python_error").as_string()).find("min()") != std::string_view::npos);
    Kinds model;
    const auto input = make_tensor(c.at("recipe"));
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
      model(input);
    }
    const auto full = read_json(dir / "Kinds_debug_tree_FULL_TENSORS.json");
    const auto& record = full.at("children").at(0).at("outputs").as_object();
    std::vector<std::string> keys;
    for (const auto& e : record) keys.emplace_back(e.key());
    DOCTEST_CHECK(keys == std::vector<std::string>{"shape", "dtype", "value", "mean", "std"});
    DOCTEST_CHECK(record.at("mean") == "tensor(nan)");
    DOCTEST_CHECK(record.at("std") == "tensor(nan)");
    DOCTEST_CHECK(record.at("shape") == boost::json::value(tracetorch::python_shape_repr(input.sizes())));
    DOCTEST_CHECK(record.at("value").at(0) == boost::json::value(tracetorch::python_repr(input)));
  }
}

DOCTEST_TEST_CASE("tensors safetensors cannot hold: complex64 is written, complex128 is a clear error") {
  Kinds model;
  {
    const auto input = make_tensor(trace_kind_cases().at("conj_view").at("recipe"));
    const auto files = trace_files(model, input, false);
    TempDir one;
    { std::ofstream(one / "t.safetensors", std::ios::binary) << files.at("Kinds.echo_outputs.safetensors"); }
    const auto loaded = tracetorch::safetensors::load_single(one / "t.safetensors");
    DOCTEST_CHECK(same_bits(loaded, input.resolve_conj()));
    DOCTEST_CHECK_FALSE(loaded.is_conj());
  }
  const auto input = make_tensor(trace_kind_cases().at("complex128").at("recipe"));
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
  DOCTEST_CHECK_THROWS_WITH_AS(model(input), doctest::Contains("which safetensors cannot store"), tracetorch::Error);
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  model(input.to(torch::kComplexFloat));  // the next trace works
  DOCTEST_CHECK(std::filesystem::exists(dir / "Kinds.echo_outputs.safetensors"));
}

DOCTEST_TEST_CASE("a large tensor is printed summarised, with no copy of its data") {
  // 100 million float32 elements (400 MB if materialised) that share 4 KB of storage.
  const auto big = torch::arange(1000, torch::kFloat).expand({100'000, 1000});
  Kinds model;
  TempDir dir;
  const long before = peak_rss_kib();
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
    model(big);
  }
  const long grown_mib = (peak_rss_kib() - before) / 1024;
  DOCTEST_INFO("peak RSS grew by " << grown_mib << " MiB");
  DOCTEST_CHECK(grown_mib < 100);
  const auto full = read_json(dir / "Kinds_debug_tree_FULL_TENSORS.json");
  const auto& record = full.at("children").at(0).at("outputs");
  const auto& lines = record.at("value").as_array();
  DOCTEST_CHECK(lines.size() == 7);  // 3 rows, "...", 3 rows
  DOCTEST_CHECK(lines.at(3) == "        ...,");
  DOCTEST_CHECK(std::string_view(lines.at(0).as_string()).find("...") != std::string_view::npos);
  DOCTEST_CHECK(record.at("min") == "tensor(0.)");
  DOCTEST_CHECK(record.at("max") == "tensor(9.9900e+02)");
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
