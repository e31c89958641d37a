// expect: T cannot be constructed from Args
#include <tracetorch/module.hpp>
#include <tracetorch/patch_mapping.hpp>

struct ExpertsConfig {};

// Built from an int, registered as built from the original's ExpertsConfig.
struct FusedExpertsImpl : torch::nn::Module {
  explicit FusedExpertsImpl(int experts) : experts(experts) {}
  torch::Tensor forward(const torch::Tensor& x) { return x; }
  int experts;
};
TRACEABLE(FusedExperts);

int main() { tracetorch::register_patch_mapping({{"Experts", tracetorch::replacement<FusedExperts, ExpertsConfig>()}}); }
