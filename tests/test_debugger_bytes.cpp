// tracetorch/debugger.hpp: the bytes of a trace stay the same from one build to the next.
// tests/data/golden_trace holds both kinds of trace of GoldenNet as the debugger wrote them before
// the headers were restructured (issue 22); every file written now must equal it byte for byte.
// GoldenNet computes exactly: its weights and inputs are small multiples of 1/4, so every sum is
// exact in float32 whatever order the CPU's kernels add in, and the bytes do not depend on the
// machine.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "test_helpers.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>

namespace golden {

struct Cache {
  int layers = 2;
};
std::string tracetorch_repr(const Cache& cache) { return "GoldenCache(layers=" + std::to_string(cache.layers) + ")"; }

struct GateKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<const Cache*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<double> scaling = tracetorch::defaults_to(0.5);
};
TRACETORCH_KEYWORDS(GateKeywords, attention_mask, past_key_values, use_cache, scaling);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int dim) {
    fc = register_module("fc", tracetorch::nn::Linear(dim, dim));
    act = register_module("act", tracetorch::nn::ReLU());
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& h, const GateKeywords& kw = {}) {
    auto x = act(fc(h));
    if (kw.attention_mask.has_value() && kw.attention_mask->defined()) x = x * *kw.attention_mask;
    return {x + h, x * kw.scaling.value()};
  }
  tracetorch::nn::Linear fc{nullptr};
  tracetorch::nn::ReLU act{nullptr};
};
TRACEABLE(Block);

struct GoldenNetImpl : torch::nn::Module {
  GoldenNetImpl() {
    embed = register_module("embed", tracetorch::nn::Embedding(16, 8));
    first = register_module("first", Block(8));
    second = register_module("second", Block(8));
    head = register_module("head", tracetorch::nn::Linear(8, 4));
    torch::NoGradGuard no_grad;
    for (auto& parameter : parameters()) {
      // Multiples of 1/4 in [-1, 1]: exact products and sums (see the file comment).
      const auto n = parameter.numel();
      parameter.copy_(((torch::arange(n) * 7) % 9 - 4).to(torch::kFloat).div(4).reshape(parameter.sizes()));
    }
  }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input_ids) {
    auto h = embed(input_ids);
    auto [a, s] = first(h, {.attention_mask = torch::full_like(h, 0.5), .past_key_values = &cache, .use_cache = true});
    auto [b, t] = first(a);  // the same module twice: two nodes, two sets of files
    auto [c, u] = second(b, {.attention_mask = nullptr, .scaling = 0.25});
    return {head(c), s + t + u};
  }
  Cache cache;
  tracetorch::nn::Embedding embed{nullptr};
  Block first{nullptr}, second{nullptr};
  tracetorch::nn::Linear head{nullptr};
};
TRACEABLE(GoldenNet);

}  // namespace golden

namespace {

using tracetorch_test::file_names;

}  // namespace

DOCTEST_TEST_CASE("both kinds of trace are byte for byte the ones written before the restructure (tests/data/golden_trace)") {
  golden::GoldenNet net;
  const auto input_ids = torch::arange(8).reshape({2, 4}) % 16;
  tracetorch_test::TempDir dir;
  for (const bool use_repr : {true, false}) {
    const auto kind = use_repr ? "repr" : "st";
    {
      auto guard = tracetorch::model_addition_debugger(
          net, {.debug_path = dir / kind, .do_prune_layers = false, .use_repr = use_repr});
      net(input_ids);
    }
    // TRACETORCH_WRITE_GOLDEN=<dir> keeps a copy, to regenerate the reference after a deliberate change.
    if (const char* keep = std::getenv("TRACETORCH_WRITE_GOLDEN")) {
      std::filesystem::create_directories(std::filesystem::path(keep) / kind);
      std::filesystem::copy(dir / kind, std::filesystem::path(keep) / kind,
                            std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
    }
    const auto reference = tracetorch_test::data_dir() / "golden_trace" / kind;
    const auto names = file_names(dir / kind);
    DOCTEST_CHECK(names == file_names(reference));
    DOCTEST_CHECK(names.size() > (use_repr ? 1u : 20u));
    for (const auto& name : names) {
      DOCTEST_INFO(kind << "/" << name);
      DOCTEST_CHECK(tracetorch_test::read_file(dir / kind / name) == tracetorch_test::read_file(reference / name));
    }
  }
}
