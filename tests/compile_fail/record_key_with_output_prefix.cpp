// expect: a record key is the output field's name .letters, digits, _., written without output_
// A record key is the field's name: upstream's flag name (output_router_logits) is one compile error.
#include <tracetorch/record_map.hpp>

struct RouterImpl : torch::nn::Module {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) { return {x, x}; }
};
TRACEABLE(Router);

constexpr auto map = tracetorch::output_records(
    tracetorch::record<"output_router_logits", tracetorch::OutputRecorder<Router, 0>>());
int main() {}
