// expect: index out of range: the target's forward returns one tensor
// attentions default to index 1, which a module returning one tensor does not have.
#include <tracetorch/capture.hpp>

struct LayerImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x; }
};
TRACEABLE(Layer);

constexpr auto map = tracetorch::output_records(tracetorch::record<"attentions", Layer>());
int main() {}
