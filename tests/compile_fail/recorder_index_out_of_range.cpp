// expect: index out of range for the target's forward output tuple
// An OutputRecorder index past the end of the target's tuple output does not compile.
#include <tracetorch/record_map.hpp>

struct AttnImpl : torch::nn::Module {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) { return {x, x}; }
};
TRACEABLE(Attn);

constexpr auto map = tracetorch::output_records(tracetorch::record<"attentions", tracetorch::OutputRecorder<Attn, 2>>());
int main() {}
