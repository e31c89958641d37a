// tracetorch/nn.hpp's transformers building blocks: the ACT2FN activations, GPT-2's Conv1D, and
// PyTorch's state dict with non-persistent buffers. Reference values: tests/data/nn_cases.safetensors,
// written by tests/data/make_nn_cases.py with the same torch 1.13 the tests link.

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace {

const std::map<std::string, torch::Tensor>& nn_cases() {
  static const auto cases = tracetorch::safetensors::load(tracetorch_test::data_dir() / "nn_cases.safetensors");
  return cases;
}

std::string_view traced_name_of(const torch::nn::AnyModule& module) {
  const auto* traced = dynamic_cast<const tracetorch::detail::TracedModuleBase*>(module.ptr().get());
  return traced == nullptr ? std::string_view("<untraced>") : traced->traced_name();
}

// GPT-2's MLP shape: Conv1D up, the config's activation, Conv1D down.
struct ConvMlpImpl : torch::nn::Module {
  explicit ConvMlpImpl(const std::string& activation) {
    c_fc = register_module("c_fc", tracetorch::nn::Conv1D(8, 4));
    act = tracetorch::nn::get_activation(activation);
    register_module("act", act.ptr());
    c_proj = register_module("c_proj", tracetorch::nn::Conv1D(4, 8));
  }
  torch::Tensor forward(const torch::Tensor& x) { return c_proj(act.forward(c_fc(x))); }
  tracetorch::nn::Conv1D c_fc{nullptr}, c_proj{nullptr};
  torch::nn::AnyModule act;
};
TRACEABLE(ConvMlp);

// Buffers of both kinds at two levels, in the layout of the Python check in the test below.
struct RotaryImpl : tracetorch::nn::Module {
  RotaryImpl() {
    inv_freq = register_buffer("inv_freq", torch::ones({2}), {.persistent = false});
    scale = register_buffer("scale", torch::ones({1}));
  }
  torch::Tensor inv_freq, scale;
};
TRACEABLE(Rotary);

struct BufferedBlockImpl : tracetorch::nn::Module {
  BufferedBlockImpl() {
    mask = register_buffer("mask", torch::ones({2, 2}));
    proj = register_module("proj", tracetorch::nn::Linear(2, 2));
    rot = register_module("rot", Rotary());
    weight = register_parameter("weight", torch::ones({2}));
    cache = register_buffer("cache", torch::zeros({1}), {.persistent = false});
  }
  torch::Tensor mask, weight, cache;
  tracetorch::nn::Linear proj{nullptr};
  Rotary rot{nullptr};
};
TRACEABLE(BufferedBlock);

struct CloneableBufferedImpl : torch::nn::Cloneable<CloneableBufferedImpl>, tracetorch::nn::Module {
  CloneableBufferedImpl() { reset(); }
  void reset() override { table = register_buffer("table", torch::arange(3.0), {.persistent = false}); }
  torch::Tensor table;
};

std::vector<std::string> keys_of(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<std::string> keys;
  for (const auto& item : tensors) keys.push_back(item.first);
  return keys;
}

}  // namespace

DOCTEST_TEST_CASE("nn: every ACT2FN activation equals PyTorch's output bit for bit (nn_cases.safetensors)") {
  const auto& cases = nn_cases();
  const torch::Tensor& input = cases.at("input");
  std::size_t checked = 0;
  for (const std::string_view name : tracetorch::nn::activation_names()) {
    DOCTEST_CAPTURE(name);
    const auto expected = cases.find("act." + std::string(name));
    DOCTEST_REQUIRE_MESSAGE(expected != cases.end(), "make_nn_cases.py has no case for " << name);
    torch::nn::AnyModule act = tracetorch::nn::get_activation(name);
    const torch::Tensor output = act.forward(input);
    DOCTEST_CHECK_MESSAGE(torch::equal(output, expected->second),
                          name << ": max |C++ - Python| = " << (output - expected->second).abs().max().item<float>());
    ++checked;
  }
  // Every case the script wrote is one get_activation knows: the two lists cannot drift apart.
  std::size_t activation_cases = 0;
  for (const auto& [key, tensor] : cases) activation_cases += key.starts_with("act.") ? 1 : 0;
  DOCTEST_CHECK(checked == activation_cases);
  DOCTEST_CHECK(checked == 20);
}

DOCTEST_TEST_CASE("nn: each activation is traced under transformers' class name for it") {
  const std::map<std::string, std::string> python_class = {
      {"gelu", "GELUActivation"},          {"gelu_10", "ClippedGELUActivation"},
      {"gelu_fast", "FastGELUActivation"}, {"gelu_new", "NewGELUActivation"},
      {"gelu_python", "GELUActivation"},   {"gelu_pytorch_tanh", "GELUTanh"},
      {"gelu_python_tanh", "GELUTanh"},    {"gelu_accurate", "AccurateGELUActivation"},
      {"laplace", "LaplaceActivation"},    {"leaky_relu", "LeakyReLU"},
      {"linear", "LinearActivation"},      {"mish", "MishActivation"},
      {"quick_gelu", "QuickGELUActivation"}, {"relu", "ReLU"},
      {"relu2", "ReLUSquaredActivation"},  {"relu6", "ReLU6"},
      {"sigmoid", "Sigmoid"},              {"silu", "SiLUActivation"},
      {"swish", "SiLU"},                   {"tanh", "Tanh"},
  };
  DOCTEST_CHECK(python_class.size() == tracetorch::nn::activation_names().size());
  for (const std::string_view name : tracetorch::nn::activation_names()) {
    DOCTEST_CAPTURE(name);
    DOCTEST_CHECK(traced_name_of(tracetorch::nn::get_activation(name)) == python_class.at(std::string(name)));
  }
  // A trace rooted at one shows the class name, as Python's debugger shows model.__class__.__name__.
  tracetorch::nn::NewGELUActivation gelu_new;
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(gelu_new, {.debug_path = dir.path()});
    gelu_new(torch::ones({2}));
  }
  DOCTEST_CHECK(tracetorch_test::read_json(dir / "NewGELUActivation_debug_tree_SUMMARY.json").at("module_path") ==
                "NewGELUActivation");
}

DOCTEST_TEST_CASE("nn: gelu_new is not LibTorch's tanh GELU kernel (a port that swaps them differs in the last bit)") {
  const auto& cases = nn_cases();
  const torch::Tensor& input = cases.at("input");
  const torch::Tensor kernel = torch::gelu(input, "tanh");
  const torch::Tensor gelu_new = tracetorch::nn::functional::gelu_new(input);
  const auto differing = kernel.ne(gelu_new).sum().item<std::int64_t>();
  const float largest = (kernel - gelu_new).abs().max().item<float>();
  DOCTEST_CHECK(differing > 0);  // 10 of the 3218 inputs when written
  DOCTEST_CHECK(largest <= 2.4e-7f);
  DOCTEST_CHECK(torch::equal(kernel, cases.at("act.gelu_pytorch_tanh")));
  // gelu_fast rounds its constant: it differs from gelu_new more often.
  DOCTEST_CHECK(cases.at("act.gelu_fast").ne(gelu_new).sum().item<std::int64_t>() > differing);
}

DOCTEST_TEST_CASE("nn: an unknown activation name is a tracetorch::Error listing the known ones") {
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::get_activation("gelu_neww"),
                               doctest::Contains("function \"gelu_neww\" not found in ACT2FN mapping [gelu, gelu_10,"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::get_activation("GELU"), doctest::Contains("swish, tanh]"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(tracetorch::nn::ClippedGELUActivation(10, -10), tracetorch::Error);
}

DOCTEST_TEST_CASE("nn: Conv1D is transformers' GPT-2 layer: weight [nx, nf], addmm, Python's init and repr") {
  const auto& cases = nn_cases();
  tracetorch::nn::Conv1D conv(5, 4);  // nf = 5 out, nx = 4 in
  DOCTEST_CHECK(conv->weight.sizes() == torch::IntArrayRef({4, 5}));
  DOCTEST_CHECK(conv->bias.sizes() == torch::IntArrayRef({5}));
  DOCTEST_CHECK(keys_of(tracetorch::nn::state_dict(*conv)) == std::vector<std::string>{"weight", "bias"});
  DOCTEST_CHECK(torch::equal(conv->bias, torch::zeros({5})));
  {
    std::ostringstream repr;
    repr << *conv;
    DOCTEST_CHECK(repr.str() == "Conv1D(nf=5, nx=4)");
  }

  // Same seed, same initial weight as Python's Conv1D(5, 4).
  torch::manual_seed(0);
  tracetorch::nn::Conv1D seeded(5, 4);
  DOCTEST_CHECK(torch::equal(seeded->weight, cases.at("conv1d.init_weight")));

  tracetorch::nn::load_state_dict(*conv, {{"weight", cases.at("conv1d.weight")}, {"bias", cases.at("conv1d.bias")}});
  const torch::Tensor output = conv(cases.at("conv1d.input"));
  DOCTEST_CHECK(output.sizes() == torch::IntArrayRef({2, 3, 5}));
  DOCTEST_CHECK(torch::equal(output, cases.at("conv1d.output")));
  DOCTEST_CHECK_THROWS_AS(conv(torch::tensor(1.0f)), tracetorch::Error);

  // The name trap: Conv1D (capital D) is not LibTorch's convolution Conv1d.
  static_assert(!std::is_same_v<tracetorch::nn::Conv1D, tracetorch::nn::Conv1d>);
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(conv, {.debug_path = dir.path()});
    conv(cases.at("conv1d.input"));
  }
  DOCTEST_CHECK(tracetorch_test::read_json(dir / "Conv1D_debug_tree_SUMMARY.json").at("module_path") == "Conv1D");
}

DOCTEST_TEST_CASE("nn: a get_activation module registered in a model is traced at its path") {
  ConvMlp mlp("gelu_new");
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(mlp, {.debug_path = dir.path(), .do_prune_layers = false});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    mlp(torch::ones({2, 4}));
  }
  const auto summary = tracetorch_test::read_json(dir / "ConvMlp_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(tracetorch_test::module_paths(summary) ==
                std::vector<std::string>{"ConvMlp", "ConvMlp.c_fc", "ConvMlp.act", "ConvMlp.c_proj"});
}

DOCTEST_TEST_CASE("nn: a non-persistent buffer is a buffer but not in state_dict, in PyTorch's order") {
  BufferedBlock block;
  // What PyTorch 1.13 gives for the same layout built from torch.nn modules (checked by hand):
  // list(m.state_dict()) and [n for n, _ in m.named_buffers()].
  DOCTEST_CHECK(keys_of(tracetorch::nn::state_dict(*block)) ==
                std::vector<std::string>{"weight", "mask", "proj.weight", "proj.bias", "rot.scale"});
  std::vector<std::string> buffers;
  for (const auto& item : block->named_buffers()) buffers.push_back(item.key());
  DOCTEST_CHECK(buffers == std::vector<std::string>{"mask", "cache", "rot.inv_freq", "rot.scale"});
  DOCTEST_CHECK_FALSE(block->is_persistent_buffer("cache"));
  DOCTEST_CHECK(block->is_persistent_buffer("mask"));
  DOCTEST_CHECK_FALSE(tracetorch::nn::is_persistent_buffer(*block->rot, "inv_freq"));
  DOCTEST_CHECK(tracetorch::nn::is_persistent_buffer(*block->proj, "weight"));  // a plain LibTorch module

  // It still moves with the module, as a buffer does.
  block->to(torch::kFloat64);
  DOCTEST_CHECK((block->rot->inv_freq.scalar_type() == torch::kFloat64));

  // A clone (Cloneable together with tracetorch::nn::Module) keeps the flag.
  CloneableBufferedImpl cloneable;
  const auto copy = std::dynamic_pointer_cast<CloneableBufferedImpl>(cloneable.clone());
  DOCTEST_REQUIRE(copy != nullptr);
  DOCTEST_CHECK(tracetorch::nn::state_dict(*copy).empty());
  DOCTEST_CHECK(copy->named_buffers().size() == 1);
}

DOCTEST_TEST_CASE("nn: load_state_dict is strict and never expects or accepts a non-persistent buffer") {
  BufferedBlock source;
  {
    torch::NoGradGuard no_grad;
    source->proj->weight.fill_(3.0);
    source->rot->inv_freq.fill_(7.0);
  }
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : tracetorch::nn::state_dict(*source)) saved.emplace(name, tensor.detach().clone());
  DOCTEST_CHECK(saved.count("rot.inv_freq") == 0);

  BufferedBlock target;
  tracetorch::nn::load_state_dict(*target, saved, "block.safetensors");
  DOCTEST_CHECK(torch::equal(target->proj->weight, source->proj->weight));
  DOCTEST_CHECK(torch::equal(target->rot->inv_freq, torch::ones({2})));  // untouched: not in the state dict

  auto with_extra = saved;
  with_extra.emplace("rot.inv_freq", torch::ones({2}));
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::load_state_dict(*target, with_extra, "block.safetensors"),
                               doctest::Contains("block.safetensors: unexpected tensor \"rot.inv_freq\""),
                               tracetorch::Error);
  auto missing = saved;
  missing.erase("mask");
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::load_state_dict(*target, missing),
                               doctest::Contains("missing tensor \"mask\""), tracetorch::Error);
  auto reshaped = saved;
  reshaped["proj.bias"] = torch::zeros({3});
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::load_state_dict(*target, reshaped),
                               doctest::Contains("tensor \"proj.bias\" has shape [3] but the model expects [2]"),
                               tracetorch::Error);
}
