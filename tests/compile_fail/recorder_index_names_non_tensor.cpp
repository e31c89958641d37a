// expect: index names an element of the target's forward output that is neither a torch::Tensor nor
#include <tracetorch/record_map.hpp>

struct AttnImpl : torch::nn::Module {
  std::tuple<torch::Tensor, double> forward(const torch::Tensor& x) { return {x, 1.0}; }
};
TRACEABLE(Attn);

constexpr auto map = tracetorch::output_records(tracetorch::record<"attentions", tracetorch::OutputRecorder<Attn, 1>>());
int main() {}
