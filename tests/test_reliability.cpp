// Reliability of the model addition debugger under faults and bad input (issue 8): tensors of
// every kind against Python's debugger, forwards that throw, threads, nested scopes, a full disk,
// a read-only debug_path, module names that are not safe as file names. docs/reliability.md
// lists each case and its result.

#include <doctest/doctest.h>
#include <tracetorch/detail/io/read_file.hpp>
#include <tracetorch/detail/trace/reader.hpp>
#include <tracetorch/tracetorch.hpp>

#include "llama/llama.hpp"
#include "test_helpers.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <thread>

// A named namespace around the file: its toy modules (Leaf, Block, ...) keep their short names
// when the test files are compiled together (unity build).
namespace reliability_test {

namespace {

using tracetorch_test::data_dir;
using tracetorch_test::dtype_named;
using tracetorch_test::from_hex;
using tracetorch_test::int_list;
using tracetorch_test::read_file;
using tracetorch_test::module_paths;
using tracetorch_test::read_json;
using tracetorch_test::snapshot;
using tracetorch_test::TempDir;

// ---------------------------------------------------------------------------------------------
// Models

/// Returns its input: one tensor seen as the root's input and a leaf's input and output.
struct EchoImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
TRACEABLE(Echo);

/// Python's `Kinds` in tests/data/make_trace_kinds.py.
struct KindsImpl : torch::nn::Module {
  KindsImpl() { echo = register_module("echo", Echo()); }
  torch::Tensor forward(torch::Tensor x) { return echo(x); }
  Echo echo{nullptr};
};
TRACEABLE(Kinds);

/// A leaf that can be told to throw after doing its work.
struct LeafImpl : torch::nn::Module {
  LeafImpl() { lin = register_module("lin", tracetorch::nn::Linear(4, 4)); }
  torch::Tensor forward(torch::Tensor x) {
    auto y = lin(x);
    if (fail || (fail_on_call && ++calls == *fail_on_call)) throw std::runtime_error("leaf failed");
    return y;
  }
  tracetorch::nn::Linear lin{nullptr};
  bool fail = false;
  std::optional<int> fail_on_call;  // fail the n-th call only
  int calls = 0;
};
TRACEABLE(Leaf);

struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    a = register_module("a", Leaf());
    b = register_module("b", Leaf());
  }
  torch::Tensor forward(torch::Tensor x) { return b(a(x)); }
  Leaf a{nullptr}, b{nullptr};
};
TRACEABLE(Block);

/// Outer -> block -> {a, b} -> lin, and head: three levels, seven traced modules.
struct OuterImpl : torch::nn::Module {
  OuterImpl() {
    block = register_module("block", Block());
    head = register_module("head", tracetorch::nn::Linear(4, 2));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = block(x);
    if (catch_block_failure) {
      // A model that recovers from a failing submodule: the trace goes on without that call.
      try {
        y = block(y);
      } catch (const std::runtime_error&) {
      }
    }
    return head(y);
  }
  Block block{nullptr};
  tracetorch::nn::Linear head{nullptr};
  bool catch_block_failure = false;
};
TRACEABLE(Outer);

Outer make_outer() {
  torch::manual_seed(8);
  Outer model;
  model->eval();
  return model;
}

torch::Tensor outer_input(double offset = 0.0) {
  return (torch::arange(8, torch::kFloat).reshape({2, 4}) * 0.25 - 1.0 + offset);
}

// ---------------------------------------------------------------------------------------------
// Files

std::set<std::string> names_of(const std::map<std::string, std::string>& files) {
  std::set<std::string> out;
  for (const auto& [name, content] : files) out.insert(name);
  return out;
}

/// The files one trace of `model` writes into a fresh directory.
template <class Model, class Input>
std::map<std::string, std::string> trace_files(Model& model, const Input& input, bool use_repr) {
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(input);
  }
  return snapshot(dir.path());
}

/// Every "./file" reference in a FULL_TENSORS tree.
void file_references(const boost::json::value& value, std::vector<std::string>& out) {
  if (value.is_object()) {
    for (const auto& e : value.as_object()) file_references(e.value(), out);
  } else if (value.is_array()) {
    for (const auto& e : value.as_array()) file_references(e, out);
  } else if (value.is_string() && value.as_string().starts_with("./")) {
    out.emplace_back(value.as_string().subview(2));
  }
}


bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.numel() == 0) return true;  // no data (and data_ptr() may be null)
  const auto x = a.resolve_conj().resolve_neg().contiguous(), y = b.resolve_conj().resolve_neg().contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.numel()) * x.element_size()) == 0;
}

bool all_parameters_equal(torch::nn::Module& a, const std::vector<torch::Tensor>& saved) {
  const auto now = a.parameters();
  if (now.size() != saved.size()) return false;
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (!torch::equal(now[i], saved[i])) return false;
  }
  return true;
}

std::vector<torch::Tensor> copy_parameters(torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.parameters()) out.push_back(p.detach().clone());
  return out;
}

std::size_t attached_modules(torch::nn::Module& model) {
  std::size_t n = 0;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      n += traced->attachments_.load() != nullptr ? 1 : 0;
    }
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Faults the tests inject

/// A small tmpfs mounted on `dir` (root with CAP_SYS_ADMIN only): writes past its size fail
/// with ENOSPC, a real full disk.
class SmallTmpfs {
 public:
  SmallTmpfs(std::filesystem::path dir, const std::string& size) : dir_(std::move(dir)) {
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

  /// Fills the file system with a ballast file so that about `free_bytes` remain.
  void leave_free(std::uint64_t free_bytes) const {
    std::filesystem::remove(ballast());
    struct statvfs info {};
    if (::statvfs(dir_.c_str(), &info) != 0) throw std::runtime_error("statvfs failed");
    const std::uint64_t available = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
    if (available <= free_bytes) return;
    std::FILE* f = std::fopen(ballast().c_str(), "wb");
    const std::string block(4096, '\0');
    for (std::uint64_t left = available - free_bytes; left > 0;) {
      const auto n = std::min<std::uint64_t>(left, block.size());
      if (std::fwrite(block.data(), 1, n, f) != n) break;
      left -= n;
    }
    std::fclose(f);
  }
  void remove_ballast() const { std::filesystem::remove(ballast()); }
  std::filesystem::path ballast() const { return dir_ / "ballast"; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
};

/// Limits the size of files this process writes (RLIMIT_FSIZE) with SIGXFSZ ignored, so that a
/// write past the limit fails with EFBIG: a full disk that any user can simulate.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

/// Takes CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER out of this thread's effective
/// capabilities (they stay permitted and come back at scope end), so that file permissions
/// bind root too: CI runs as root, where chmod 0555 alone does not stop a write.
class FilePermissionsBindRoot {
 public:
  FilePermissionsBindRoot() {
    header_ = {_LINUX_CAPABILITY_VERSION_3, 0};
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    for (const int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
      reduced[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
    }
    changed_ = ::syscall(SYS_capset, &header_, reduced) == 0;
  }
  FilePermissionsBindRoot(const FilePermissionsBindRoot&) = delete;
  FilePermissionsBindRoot& operator=(const FilePermissionsBindRoot&) = delete;
  ~FilePermissionsBindRoot() {
    if (changed_) ::syscall(SYS_capset, &header_, saved_);
  }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool changed_ = false;
};

/// True when a new file can be created in `dir` (by this thread, with its capabilities).
bool can_create_file_in(const std::filesystem::path& dir) {
  const auto probe = dir / "probe-write";
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
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

// ---------------------------------------------------------------------------------------------
// Forwards that throw

DOCTEST_TEST_CASE("a forward that throws deep inside: previous trace, model and scope intact, next trace works") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    const auto reference_first = trace_files(model, outer_input(), use_repr);
    const auto reference_second = trace_files(model, outer_input(0.5), use_repr);
    DOCTEST_REQUIRE(reference_first != reference_second);
    const auto parameters = copy_parameters(*model);
    TempDir dir;
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    DOCTEST_CHECK(snapshot(dir.path()) == reference_first);
    const auto attached = attached_modules(*model);
    DOCTEST_CHECK(attached == 7);

    model->block->b->fail = true;  // three levels down, after block.a and block.b.lin ran
    DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(0.5)), "leaf failed", std::runtime_error);
    DOCTEST_CHECK(snapshot(dir.path()) == reference_first);  // no new, removed or changed file
    DOCTEST_CHECK(all_parameters_equal(*model, parameters));
    DOCTEST_CHECK(torch::GradMode::is_enabled());
    DOCTEST_CHECK(attached_modules(*model) == attached);

    model->block->b->fail = false;
    model(outer_input(0.5));
    DOCTEST_CHECK(snapshot(dir.path()) == reference_second);
  }
}

DOCTEST_TEST_CASE("a submodule failure the model catches: the trace goes on without that call") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    model->catch_block_failure = true;
    model->block->b->fail_on_call = 2;  // the second block call fails in block.b, after block.b.lin
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
      model(outer_input());
    }
    const auto full = read_json(dir / "Outer_debug_tree_FULL_TENSORS.json");
    DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Outer", "Outer.block", "Outer.block.a", "Outer.block.a.lin",
                                                                 "Outer.block.b", "Outer.block.b.lin", "Outer.head"});
    // No file of the failed call is left: exactly the referenced tensors and the two JSON files.
    std::vector<std::string> referenced;
    file_references(full, referenced);
    std::set<std::string> expected(referenced.begin(), referenced.end());
    expected.insert({"Outer_debug_tree_FULL_TENSORS.json", "Outer_debug_tree_SUMMARY.json"});
    if (!use_repr) expected.insert("Outer_outputs.safetensors");  // written, not referenced, as in Python
    DOCTEST_CHECK(names_of(snapshot(dir.path())) == expected);
    DOCTEST_CHECK(referenced.size() == (use_repr ? 0u : 10u));
  }
}

DOCTEST_TEST_CASE("tracing that fails midway (a tensor safetensors cannot hold) leaves the previous trace whole") {
  struct TwoInputsImpl : torch::nn::Module {
    TwoInputsImpl() {
      lin = register_module("lin", tracetorch::nn::Linear(4, 4));
      echo = register_module("echo", Echo());
    }
    torch::Tensor forward(torch::Tensor x, torch::Tensor extra) {
      auto y = lin(x);
      echo(extra);
      return y;
    }
    tracetorch::nn::Linear lin{nullptr};
    Echo echo{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(TwoInputs, TwoInputsImpl);
  torch::manual_seed(3);
  TwoInputs model;
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
  model(outer_input(), torch::ones({2}));
  const auto before = snapshot(dir.path());
  // The root's inputs are written first, so the failure comes after files were already staged.
  DOCTEST_CHECK_THROWS_AS(model(outer_input(1.0), torch::ones({2}, torch::kComplexDouble)), tracetorch::Error);
  DOCTEST_CHECK(snapshot(dir.path()) == before);
  model(outer_input(1.0), torch::ones({2}));
  DOCTEST_CHECK(snapshot(dir.path()) != before);
  DOCTEST_CHECK(names_of(snapshot(dir.path())) == names_of(before));
}

// ---------------------------------------------------------------------------------------------
// Threads

DOCTEST_TEST_CASE("two threads tracing two models at once write the same traces as one thread") {
  const auto config = llama::LlamaConfig::from_json_file(tracetorch_test::tiny_llama_dir() / "config.json");
  const auto ids = tracetorch::safetensors::load(tracetorch_test::tiny_llama_dir() / "input_ids.safetensors").at("input_ids");
  const auto make_llama = [&] {
    llama::LlamaModel model(config);
    model->eval();
    llama::load_state_dict(*model, tracetorch_test::tiny_llama_dir() / "model.safetensors");
    return model;
  };
  auto llama_model = make_llama();
  auto outer = make_outer();
  const llama::LlamaModelInputs llama_input{.input_ids = ids};
  const auto llama_reference = trace_files(llama_model, llama_input, false);
  const auto outer_reference = trace_files(outer, outer_input(), true);

  TempDir llama_dir, outer_dir;
  std::atomic<int> failures{0};
  const auto run = [&](auto& model, const auto& input, const std::filesystem::path& dir, bool use_repr) {
    try {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr});
      for (int i = 0; i < 5; ++i) model(input);
    } catch (...) {
      ++failures;
    }
  };
  std::thread first([&] { run(llama_model, llama_input, llama_dir.path(), false); });
  std::thread second([&] { run(outer, outer_input(), outer_dir.path(), true); });
  first.join();
  second.join();
  DOCTEST_CHECK(failures == 0);
  DOCTEST_CHECK(snapshot(llama_dir.path()) == llama_reference);
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_reference);
}

DOCTEST_TEST_CASE("two threads tracing two models of one type into one debug_path: whole files, no leftovers") {
  auto first_model = make_outer();
  auto second_model = make_outer();  // same seed: same weights, same trace
  const auto reference = trace_files(first_model, outer_input(), false);
  TempDir dir;
  std::atomic<int> failures{0};
  const auto run = [&](Outer& model) {
    try {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = false});
      for (int i = 0; i < 20; ++i) model(outer_input());
    } catch (...) {
      ++failures;
    }
  };
  std::thread a([&] { run(first_model); });
  std::thread b([&] { run(second_model); });
  a.join();
  b.join();
  DOCTEST_CHECK(failures == 0);
  DOCTEST_CHECK(snapshot(dir.path()) == reference);
}

DOCTEST_TEST_CASE("one model called from two threads at once: one forward is recorded, the other runs untraced") {
  // The leaf of the first thread waits inside the traced forward until the second thread's
  // forward of the same model has finished.
  struct GateImpl : torch::nn::Module {
    torch::Tensor forward(torch::Tensor x) {
      if (x.item<float>() == 1.0f) {
        std::unique_lock lock(mutex);
        inside = true;
        changed.notify_all();
        changed.wait(lock, [&] { return released; });
      }
      return x + 1;
    }
    std::mutex mutex;
    std::condition_variable changed;
    bool inside = false, released = false;
  };
  TRACETORCH_TRACEABLE_IMPL(Gate, GateImpl);
  struct GatedImpl : torch::nn::Module {
    GatedImpl() { gate = register_module("gate", Gate()); }
    torch::Tensor forward(torch::Tensor x) { return gate(x); }
    Gate gate{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(Gated, GatedImpl);
  Gated model;
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path()});
  auto& gate = *model->gate;
  std::thread traced([&] { model(torch::ones({1})); });
  {
    std::unique_lock lock(gate.mutex);
    gate.changed.wait(lock, [&] { return gate.inside; });
  }
  const auto untraced_result = model(torch::full({1}, 5.0f));  // while the first is being recorded
  DOCTEST_CHECK(untraced_result.item<float>() == 6.0f);
  DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  {
    std::lock_guard lock(gate.mutex);
    gate.released = true;
  }
  gate.changed.notify_all();
  traced.join();
  const auto full = read_json(dir / "Gated_debug_tree_FULL_TENSORS.json");
  DOCTEST_CHECK(full.at("inputs").at("args").at(0).at("value").at(0) == "tensor([1.0000e+00])");
  DOCTEST_CHECK(module_paths(full) == std::vector<std::string>{"Gated", "Gated.gate"});
}

DOCTEST_TEST_CASE("one model traced while many threads call it: every trace written is whole") {
  auto model = make_outer();
  const auto reference = trace_files(model, outer_input(), true);
  TempDir dir;
  auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < 25; ++i) model(outer_input());
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  DOCTEST_CHECK(failures == 0);
  DOCTEST_CHECK(snapshot(dir.path()) == reference);
}

DOCTEST_TEST_CASE("debugger scopes opened and closed on one thread while another calls the model: no trace mixes") {
  // Each scope frees its attachments while the plain thread's calls may be walking past them,
  // and a scope that ends while the other thread records waits for it (run under ASan in CI).
  auto model = make_outer();
  const auto reference = trace_files(model, outer_input(), true);
  const auto plain_expected = model(outer_input());
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread plain([&] {
    for (int i = 0; i < 2000 && !done; ++i) {
      if (!torch::equal(model(outer_input()), plain_expected)) ++wrong;
    }
  });
  for (int i = 0; i < 40; ++i) {
    TempDir dir;
    {
      auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
      model(outer_input());
    }
    // The plain thread may have recorded the forward instead of this one; either way it is whole.
    if (snapshot(dir.path()) != reference) ++wrong;
  }
  done = true;
  plain.join();
  DOCTEST_CHECK(wrong.load() == 0);
}

// ---------------------------------------------------------------------------------------------
// Nested scopes

DOCTEST_TEST_CASE("a scope on a submodule inside a scope on the model: each writes its own whole trace") {
  auto model = make_outer();
  const auto outer_reference = trace_files(model, outer_input(), true);
  // The block's own trace, alone: the model passes its input to the block unchanged.
  const auto block_alone = trace_files(model->block, outer_input(), false);

  TempDir outer_dir, block_dir;
  std::optional<tracetorch::DebuggerScope> outer_scope(
      tracetorch::model_addition_debugger(model, {.debug_path = outer_dir.path(), .do_prune_layers = false}));
  std::optional<tracetorch::DebuggerScope> block_scope(tracetorch::model_addition_debugger(
      model->block, {.debug_path = block_dir.path(), .do_prune_layers = false, .use_repr = false}));
  model(outer_input());
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_reference);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_alone);
  const auto block_trace = read_json(block_dir / "Block_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(module_paths(block_trace) ==
                std::vector<std::string>{"Block", "Block.a", "Block.a.lin", "Block.b", "Block.b.lin"});
  DOCTEST_CHECK(torch::GradMode::is_enabled());

  // Ended out of order: the outer scope first. The inner one still records alone.
  outer_scope.reset();
  std::filesystem::remove_all(outer_dir.path());
  std::filesystem::create_directories(outer_dir.path());
  std::filesystem::remove_all(block_dir.path());
  std::filesystem::create_directories(block_dir.path());
  model(outer_input());
  DOCTEST_CHECK(tracetorch_test::count_files(outer_dir.path()) == 0);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_alone);
  block_scope.reset();
  DOCTEST_CHECK(attached_modules(*model) == 0);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
}

DOCTEST_TEST_CASE("a forward that throws under two nested scopes leaves both traces and the model intact") {
  auto model = make_outer();
  TempDir outer_dir, block_dir;
  auto outer_scope = tracetorch::model_addition_debugger(model, {.debug_path = outer_dir.path(), .use_repr = false});
  auto block_scope = tracetorch::model_addition_debugger(model->block, {.debug_path = block_dir.path(), .use_repr = false});
  model(outer_input());
  const auto outer_before = snapshot(outer_dir.path());
  const auto block_before = snapshot(block_dir.path());
  model->block->b->fail = true;
  DOCTEST_CHECK_THROWS_AS(model(outer_input(2.0)), std::runtime_error);
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_before);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_before);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  model->block->b->fail = false;
  model(outer_input());
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_before);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_before);
}

// ---------------------------------------------------------------------------------------------
// A full disk, a read-only debug_path

/// Runs forwards with input 2 under `fault` settings that range from "fails at the first byte"
/// to "succeeds"; after each, the directory holds either the whole previous trace (input 1),
/// byte for byte, or the whole new one: never a mix, a truncated file or a temporary file.
template <class Fault>
void check_all_or_nothing(const std::filesystem::path& dir, bool use_repr, const std::vector<std::uint64_t>& levels,
                          Fault&& fault, const std::string& expected_error) {
  auto model = make_outer();
  const auto first = trace_files(model, outer_input(), use_repr);
  const auto second = trace_files(model, outer_input(1.0), use_repr);
  const auto parameters = copy_parameters(*model);
  int failed = 0, succeeded = 0;
  for (const auto level : levels) {
    DOCTEST_INFO("use_repr " << use_repr << ", level " << level);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename() != "ballast") std::filesystem::remove_all(entry.path());
    }
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    bool ok = false;
    std::string error;
    {
      auto injected = fault(level);
      try {
        model(outer_input(1.0));
        ok = true;
      } catch (const tracetorch::Error& e) {
        error = e.what();
      }
    }
    auto files = snapshot(dir);
    files.erase("ballast");
    if (ok) {
      ++succeeded;
      DOCTEST_CHECK(files == second);
    } else {
      ++failed;
      DOCTEST_INFO(error);
      DOCTEST_CHECK(error.find(expected_error) != std::string::npos);
      DOCTEST_CHECK(error.find(dir.string()) != std::string::npos);  // names the file
      DOCTEST_CHECK(files == first);
    }
    DOCTEST_CHECK(all_parameters_equal(*model, parameters));
    DOCTEST_CHECK(torch::GradMode::is_enabled());
  }
  DOCTEST_CHECK(failed > 0);
  DOCTEST_CHECK(succeeded > 0);
}

DOCTEST_TEST_CASE("a full disk (a small tmpfs): a clear error, the previous trace whole, nothing truncated") {
  TempDir dir;
  SmallTmpfs tmpfs(dir.path(), "512k");
  if (!tmpfs.mounted()) {
    DOCTEST_MESSAGE("skipped: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN); the file-size-limit test covers this");
    return;
  }
  for (const bool use_repr : {true, false}) {
    std::vector<std::uint64_t> free_levels;
    for (std::uint64_t kib = 0; kib <= 96; kib += 4) free_levels.push_back(kib * 1024);
    check_all_or_nothing(
        dir.path(), use_repr, free_levels,
        [&](std::uint64_t free_bytes) {
          tmpfs.leave_free(free_bytes);
          struct Ballast {
            const SmallTmpfs& fs;
            ~Ballast() { fs.remove_ballast(); }
          };
          return Ballast{tmpfs};
        },
        "No space left on device");
  }
}

DOCTEST_TEST_CASE("a file size limit (EFBIG): a clear error, the previous trace whole, nothing truncated") {
  TempDir dir;
  for (const bool use_repr : {true, false}) {
    check_all_or_nothing(
        dir.path(), use_repr, {0, 1, 8, 100, 200, 1000, 2000, 4096, 5000, 10000, 1 << 20},
        [](std::uint64_t bytes) { return std::make_unique<FileSizeLimit>(bytes); }, "File too large");
  }
}

DOCTEST_TEST_CASE("a debug_path that becomes read-only: a clear error, the previous trace whole, the next trace works") {
  for (const bool use_repr : {true, false}) {
    DOCTEST_INFO("use_repr " << use_repr);
    auto model = make_outer();
    const auto first = trace_files(model, outer_input(), use_repr);
    const auto second = trace_files(model, outer_input(1.0), use_repr);
    TempDir dir;
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false, .use_repr = use_repr});
    model(outer_input());
    {
      std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                                                   std::filesystem::perms::group_read | std::filesystem::perms::group_exec |
                                                   std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
      FilePermissionsBindRoot as_plain_user;
      if (can_create_file_in(dir.path())) {
        DOCTEST_MESSAGE("skipped: file permissions do not bind this process (root without CAP_SETPCAP control?)");
        std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
        return;
      }
      DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(1.0)), doctest::Contains("Permission denied"), tracetorch::Error);
      DOCTEST_CHECK_THROWS_WITH_AS(model(outer_input(1.0)), doctest::Contains(dir.path().string().c_str()), tracetorch::Error);
      // And a new scope on it is refused before any forward.
      DOCTEST_CHECK_THROWS_WITH_AS((void)tracetorch::model_addition_debugger(model, {.debug_path = dir.path()}),
                                   doctest::Contains("Permission denied"), tracetorch::Error);
    }
    std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
    DOCTEST_CHECK(snapshot(dir.path()) == first);
    DOCTEST_CHECK(torch::GradMode::is_enabled());
    model(outer_input(1.0));
    DOCTEST_CHECK(snapshot(dir.path()) == second);
  }
}

// ---------------------------------------------------------------------------------------------
// Paths

DOCTEST_TEST_CASE("file names: '/', '%' and control characters are escaped as %XX, nothing else") {
  using tracetorch::detail::file_name_for;
  DOCTEST_CHECK(file_name_for("LlamaModel.layers.0.mlp_inputs_args_0") == "LlamaModel.layers.0.mlp_inputs_args_0");
  DOCTEST_CHECK(file_name_for("M.a/b_outputs") == "M.a%2Fb_outputs");
  DOCTEST_CHECK(file_name_for("M.a%2Fb_outputs") == "M.a%252Fb_outputs");
  DOCTEST_CHECK(file_name_for("M_outputs_../../x") == "M_outputs_..%2F..%2Fx");
  DOCTEST_CHECK(file_name_for(std::string("a\nb\tc\x7f\x01", 7) + std::string(1, '\0')) == "a%0Ab%09c%7F%01%00");
  DOCTEST_CHECK(file_name_for("sp ace \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de:*?<>|\\\"'") == "sp ace \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de:*?<>|\\\"'");
}

DOCTEST_TEST_CASE("module names unsafe as file names: every file lands in debug_path, named as documented") {
  // LibTorch forbids only empty names and names with a dot.
  {
    torch::nn::Module probe;
    DOCTEST_CHECK_THROWS_AS(probe.register_module("a.b", tracetorch::nn::Linear(1, 1)), c10::Error);
    DOCTEST_CHECK_THROWS_AS(probe.register_module("", tracetorch::nn::Linear(1, 1)), c10::Error);
  }
  static const std::vector<std::string> odd_names = {"a/b", "a%2Fb", "/", "sp ace", "new\nline", "\xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de", "%"};
  struct OddNamesImpl : torch::nn::Module {
    OddNamesImpl() {
      for (const auto& name : odd_names) layers.push_back(register_module(name, tracetorch::nn::Linear(2, 2)));
    }
    std::map<std::string, torch::Tensor> forward(torch::Tensor x) {
      for (auto& layer : layers) x = layer(x);
      return {{"../../outside", x}, {"/absolute", x + 1}};
    }
    std::vector<tracetorch::nn::Linear> layers;
  };
  TRACETORCH_TRACEABLE_IMPL(OddNames, OddNamesImpl);
  OddNames model;
  TempDir parent;
  const auto dir = parent / "debug";
  std::filesystem::create_directories(dir);
  // A decoy: with the names unescaped, "OddNames_outputs_../../outside" would resolve to
  // parent/outside.safetensors through this directory.
  std::filesystem::create_directories(dir / "OddNames_outputs_..");
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .use_repr = false});
    model(torch::ones({1, 2}));
  }
  DOCTEST_CHECK(names_of(snapshot(parent.path())) == std::set<std::string>{"debug"});
  const auto files = snapshot(dir);
  for (const auto& [name, content] : files) {
    DOCTEST_INFO(name);
    DOCTEST_CHECK((name == "OddNames_outputs_.." || std::filesystem::is_regular_file(dir / name)));
  }
  DOCTEST_CHECK(snapshot(dir / "OddNames_outputs_..").empty());
  const auto full = read_json(dir / "OddNames_debug_tree_FULL_TENSORS.json");
  std::vector<std::string> referenced;
  file_references(full, referenced);
  DOCTEST_CHECK(referenced.size() == 1 + 2 * odd_names.size());  // the root's input, each layer's input and output
  for (const auto& name : referenced) {
    DOCTEST_INFO(name);
    DOCTEST_CHECK(files.contains(name));
  }
  // + the root's two outputs (written, not referenced, as in Python), the two JSON files, the decoy
  DOCTEST_CHECK(files.size() == referenced.size() + 2 + 2 + 1);
  for (const char* expected :
       {"OddNames.a%2Fb_inputs_args_0.safetensors", "OddNames.a%252Fb_inputs_args_0.safetensors",
        "OddNames.%2F_outputs.safetensors", "OddNames.sp ace_outputs.safetensors", "OddNames.new%0Aline_outputs.safetensors",
        "OddNames.\xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de_outputs.safetensors", "OddNames.%25_outputs.safetensors",
        "OddNames_outputs_..%2F..%2Foutside.safetensors", "OddNames_outputs_%2Fabsolute.safetensors"}) {
    DOCTEST_INFO(expected);
    DOCTEST_CHECK(files.contains(expected));
  }
  // The JSON keeps the module paths as they are.
  auto paths = module_paths(full);
  DOCTEST_CHECK(std::find(paths.begin(), paths.end(), "OddNames.a/b") != paths.end());
  DOCTEST_CHECK(std::find(paths.begin(), paths.end(), "OddNames.new\nline") != paths.end());
}

DOCTEST_TEST_CASE("a module path too long for a file name: a clear error, no file left") {
  struct LongNameImpl : torch::nn::Module {
    LongNameImpl() { inner = register_module(std::string(300, 'x'), tracetorch::nn::Linear(2, 2)); }
    torch::Tensor forward(torch::Tensor x) { return inner(x); }
    tracetorch::nn::Linear inner{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(LongName, LongNameImpl);
  LongName model;
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
    const auto final_name = (dir / ("LongName." + std::string(300, 'x') + "_inputs_args_0.safetensors")).string();
    DOCTEST_CHECK_THROWS_WITH_AS(model(torch::ones({1, 2})), ("tracetorch: cannot create " + final_name + ": File name too long").c_str(),
                                 tracetorch::Error);
    DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  }
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  // With use_repr there is no file per tensor, and the trace works.
  TempDir repr_dir;
  auto repr_guard = tracetorch::model_addition_debugger(model, {.debug_path = repr_dir.path()});
  model(torch::ones({1, 2}));
  DOCTEST_CHECK(tracetorch_test::count_files(repr_dir.path()) == 2);
}

// ---------------------------------------------------------------------------------------------
// Reading files: only what can be read (detail/read_file.hpp, shared by every reader)

/// The message of the tracetorch::Error `read` throws ("" if none). If `read` blocks on the FIFO
/// `fifo` (the bug this guards against), a helper thread opens the FIFO's writing end after 10 s
/// and closes it, which ends the wait: the test then fails on the message, never hangs.
std::string refusal_without_waiting(const std::filesystem::path& fifo, const std::function<void()>& read) {
  std::atomic<bool> done{false};
  std::thread rescuer([&] {
    for (int i = 0; i < 400 && !done; ++i) {  // at most 20 s
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (i < 200) continue;
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // fails until a reader waits
      if (fd >= 0) ::close(fd);
    }
  });
  std::string message;
  try {
    read();
  } catch (const tracetorch::Error& e) {
    message = e.what();
  }
  done = true;
  rescuer.join();
  return message;
}

DOCTEST_TEST_CASE("readers refuse a FIFO, a device or a directory with one clear line, without waiting") {
  TempDir dir;
  const auto fifo = dir / "pipe.json";
  DOCTEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_cause = fifo.string() + ": is a FIFO (named pipe), not a regular file: refused";
  const auto refused = [&](const std::function<void()>& read) { return refusal_without_waiting(fifo, read); };
  DOCTEST_CHECK(refused([&] { tracetorch::detail::parse_trace_file(fifo); }) == "tracetorch: " + fifo_cause + ", reading it could wait forever");
  DOCTEST_CHECK(refused([&] { llama::LlamaConfig::from_json_file(fifo); }).find(fifo_cause) != std::string::npos);
  DOCTEST_CHECK(refused([&] { tracetorch::safetensors::Reader reader(fifo); }).find(fifo_cause) != std::string::npos);
  DOCTEST_CHECK(refused([&] { tracetorch::detail::read_regular_file(fifo, 100, "a test"); }).find(fifo_cause) != std::string::npos);

  // The trace JSON of a trace directory as a FIFO: found by name, then refused.
  TempDir trace;
  const auto json = trace / "X_debug_tree_FULL_TENSORS.json";
  DOCTEST_REQUIRE(::mkfifo(json.c_str(), 0600) == 0);
  const auto in_dir = refusal_without_waiting(json, [&] {
    tracetorch::detail::parse_trace_file(tracetorch::detail::resolve_trace_path(trace.path()));
  });
  DOCTEST_CHECK(in_dir.find(json.string() + ": is a FIFO (named pipe)") != std::string::npos);

  // A device: /dev/zero would give bytes without end.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::parse_trace_file("/dev/zero"),
                               "tracetorch: /dev/zero: is a character device, not a regular file: refused",
                               tracetorch::detail::FileRefused);
  // A directory where a file is needed.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::parse_trace_file(dir.path()),
                               ("tracetorch: " + dir.path().string() + ": is a directory, not a file").c_str(), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(llama::LlamaConfig::from_json_file(dir.path()),
                               ("tracetorch: " + dir.path().string() + ": is a directory, not a file").c_str(), tracetorch::Error);
}

DOCTEST_TEST_CASE("read limits: a file over the limit is refused before it is read, its size named") {
  TempDir dir;
  std::ofstream(dir / "big.json") << std::string(1000, ' ');
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::detail::read_regular_file(dir / "big.json", 999, "a test file"),
                               ("tracetorch: " + (dir / "big.json").string() +
                                ": is 1000 bytes, more than the limit of 999 bytes for a test file").c_str(),
                               tracetorch::Error);
  DOCTEST_CHECK(tracetorch::detail::read_regular_file(dir / "big.json", 1000, "a test file").size() == 1000);
  DOCTEST_CHECK(tracetorch::detail::kMaxTraceJsonBytes == std::uint64_t(1) << 30);  // as docs/reliability.md says
  DOCTEST_CHECK(tracetorch::detail::kMaxConfigBytes == std::uint64_t(16) << 20);
  DOCTEST_CHECK(tracetorch::detail::kMaxSourceBytes == std::uint64_t(64) << 20);
}

DOCTEST_TEST_CASE("a symbolic link in a trace directory is never followed out of it, and nothing of its target is echoed") {
  TempDir outside, trace;
  const std::string secret = "SECRET-7f3a-do-not-print";
  std::ofstream(outside / "secret.safetensors") << secret;
  std::ofstream(outside / "secret.json") << "{\"module_path\": \"" << secret << "\"}";
  std::filesystem::copy(data_dir() / "tiny_llama_upstream" / "trace_st", trace.path());
  const auto json = trace / "LlamaModel_debug_tree_FULL_TENSORS.json";
  const auto read = [&] { tracetorch::detail::parse_trace_file(tracetorch::detail::resolve_trace_path(trace.path())); };

  // A tensor file replaced by a link out of the directory: refused before anything is read.
  const auto victim = trace / "LlamaModel.norm_outputs.safetensors";
  DOCTEST_REQUIRE(std::filesystem::exists(victim));
  std::filesystem::rename(victim, trace / "norm.kept");
  std::filesystem::create_symlink(outside / "secret.safetensors", victim);
  const auto refusal = [&] {
    try {
      read();
    } catch (const tracetorch::Error& e) {
      return std::string(e.what());
    }
    return std::string("(read without error)");
  };
  std::string message = refusal();
  DOCTEST_CHECK(message == "tracetorch: " + victim.string() + ": is a symbolic link out of the trace directory: not followed");
  DOCTEST_CHECK(message.find(secret) == std::string::npos);

  // A link that stays inside the directory is followed.
  std::filesystem::remove(victim);
  std::filesystem::create_symlink("norm.kept", victim);
  DOCTEST_CHECK_NOTHROW(read());
  // ... and so is a dangling one's refusal worded without its target.
  std::filesystem::remove(victim);
  std::filesystem::create_symlink(outside / "gone", victim);
  DOCTEST_CHECK_THROWS_WITH_AS(read(), ("tracetorch: " + victim.string() + ": is a symbolic link that cannot be resolved: not followed").c_str(),
                               tracetorch::Error);

  // The trace JSON itself a link out of the directory.
  std::filesystem::remove(json);
  std::filesystem::create_symlink(outside / "secret.json", json);
  message = refusal();
  DOCTEST_CHECK(message == "tracetorch: " + json.string() + ": is a symbolic link out of the trace directory: not followed");
  DOCTEST_CHECK(message.find(secret) == std::string::npos);
}

/// A trace whose inputs nest `levels` objects, each under a key of `key_size` bytes, over a
/// list of `leaves` zeros: every leaf's location repeats all the keys above it.
std::string deeply_nested_trace(std::size_t levels, std::size_t key_size, std::size_t leaves) {
  std::string text = R"({"module_path": "Deep", "inputs": )";
  const std::string key = "{\"" + std::string(key_size, 'k') + "\": ";
  for (std::size_t i = 0; i < levels; ++i) text += key;
  text += "[";
  for (std::size_t i = 0; i < leaves; ++i) text += i == 0 ? "0" : ",0";
  text += "]" + std::string(levels, '}') + "}";
  return text;
}

DOCTEST_TEST_CASE("a deeply nested trace is read in memory proportional to its size (the locations' bytes are bounded)") {
  using tracetorch::detail::TraceParser;
  // 200 keys of 4000 bytes over 100,000 values: 1.0 MB, whose locations would take 80 GB.
  const std::string hostile = deeply_nested_trace(200, 4000, 100'000);
  DOCTEST_REQUIRE(hostile.size() < 1'100'000);
  const std::size_t budget = tracetorch::detail::kTraceLocationSlack + tracetorch::detail::kTraceLocationBytesPerInputByte * hostile.size();
  std::string message;
  try {
    TraceParser("deep.json").parse(hostile);
  } catch (const tracetorch::Error& e) {
    message = e.what();
  }
  DOCTEST_CHECK(message == "tracetorch: deep.json: module Deep: the values' locations take more than " + std::to_string(budget) +
                               " bytes, more than this file's size allows (keys nested deep above many values)");

  // The same nesting over one value is read, its location whole; the locations of every trace
  // read stay within the budget, which is what bounds the reader's memory (the bound is
  // checked before each location is copied).
  const std::string one = deeply_nested_trace(200, 4000, 1);
  TraceParser parser("one.json");
  const auto trace = parser.parse(one);
  DOCTEST_REQUIRE(trace.calls.size() == 1);
  DOCTEST_REQUIRE(trace.calls[0].inputs.size() == 1);
  DOCTEST_CHECK(trace.calls[0].inputs[0].location.size() == 6 + 200 * 4001 + 2);  // "inputs" + ".k..." x 200 + ".0"
  DOCTEST_CHECK(parser.location_bytes() == trace.calls[0].inputs[0].location.size());

  // A real trace's locations take less than one byte per byte of JSON.
  for (const char* kind : {"trace_repr", "trace_st"}) {
    const auto path = data_dir() / "tiny_llama_upstream" / kind / "LlamaModel_debug_tree_FULL_TENSORS.json";
    const std::string text = read_file(path);
    TraceParser real(path.string());
    real.parse(text);
    DOCTEST_CHECK(real.location_bytes() > 0);
    DOCTEST_CHECK(real.location_bytes() < text.size());
  }
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
