// A user's program: annotate, trace, check the trace. Built by each consumer project
// (find_package, add_subdirectory, FetchContent) to prove the integration works.
#include <tracetorch/tracetorch.hpp>

#include <fstream>
#include <iostream>
#include <iterator>

struct TwoLayerImpl : torch::nn::Module {
  TwoLayerImpl() {
    first = register_module("first", tracetorch::nn::Linear(3, 5));
    second = register_module("second", tracetorch::nn::Linear(5, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return second(torch::relu(first(x))); }
  tracetorch::nn::Linear first{nullptr}, second{nullptr};
};
TRACEABLE(TwoLayer);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer DEBUG_DIR\n";
    return 2;
  }
  TwoLayer model;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = argv[1], .do_prune_layers = false});
    model(torch::ones({1, 3}));
  }
  std::ifstream in(std::filesystem::path(argv[1]) / "TwoLayer_debug_tree_SUMMARY.json");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto summary = boost::json::parse(text);
  const auto& children = summary.at("children").as_array();
  const bool ok = summary.at("module_path") == "TwoLayer" && children.size() == 2 &&
                  children.at(1).at("module_path") == "TwoLayer.second";
  std::cout << (ok ? "consumer: trace ok\n" : "consumer: unexpected trace\n" + text);
  return ok ? 0 : 1;
}
