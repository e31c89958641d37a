// expect: the target module type was never declared TRACEABLE
#include <tracetorch/record_map.hpp>

struct PlainImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x; }
};
TORCH_MODULE(Plain);

constexpr auto map = tracetorch::output_records(tracetorch::record<"hidden_states", Plain>());
int main() {}
