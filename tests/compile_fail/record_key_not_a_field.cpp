// expect: the record map names a key that is not a field of the output struct
// A record key the output struct lacks (misspelled router_logits) is one compile error.
#include <tracetorch/capture.hpp>

struct RouterImpl : torch::nn::Module {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) { return {x, x}; }
};
TRACEABLE(Router);

struct MoeOutput {
  torch::Tensor last_hidden_state;
  std::optional<std::vector<torch::Tensor>> router_logits;
};
TRACETORCH_OUTPUT(MoeOutput, last_hidden_state, router_logits);

struct MoeImpl : torch::nn::Module {
  static constexpr auto can_record_outputs =
      tracetorch::output_records(tracetorch::record<"router_logit", tracetorch::OutputRecorder<Router, 0>>());
  MoeOutput forward(const torch::Tensor& x, const tracetorch::OutputOptions& options = {}) {
    return tracetorch::capture_outputs(*this, options, [&] { return MoeOutput{.last_hidden_state = x}; });
  }
};
TRACEABLE(Moe);
int main() {}
