// expect: an index function takes `const tracetorch::CallKeywords&` or the target's forward output
// An index function must read the call's keywords or the target's output.
#include <tracetorch/record_map.hpp>

#include <string>

struct AttnImpl : torch::nn::Module {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) { return {x, x}; }
};
TRACEABLE(Attn);

inline int weights_index(const std::string&) { return 1; }
constexpr auto map =
    tracetorch::output_records(tracetorch::record<"attentions", tracetorch::OutputRecorder<Attn, weights_index>>());
int main() {}
