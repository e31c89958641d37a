// The README's 30-second example: annotate, trace, read the JSON.
#include <tracetorch/tracetorch.hpp>

#include <fstream>
#include <iostream>

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    up = register_module("up", tracetorch::nn::Linear(8, 32));
    act = register_module("act", tracetorch::nn::GELU());
    down = register_module("down", tracetorch::nn::Linear(32, 8));
  }
  torch::Tensor forward(const torch::Tensor& x) { return down(act(up(x))); }
  tracetorch::nn::Linear up{nullptr}, down{nullptr};
  tracetorch::nn::GELU act{nullptr};
};
TRACEABLE(Mlp);  // instead of TORCH_MODULE(Mlp)

int main() {
  Mlp mlp;
  {
    auto guard = tracetorch::model_addition_debugger(mlp, {.debug_path = "quickstart_debug", .do_prune_layers = false});
    mlp(torch::randn({2, 8}));
  }  // quickstart_debug/Mlp_debug_tree_SUMMARY.json and _FULL_TENSORS.json are written
  std::cout << std::ifstream("quickstart_debug/Mlp_debug_tree_SUMMARY.json").rdbuf() << "\n";
}
