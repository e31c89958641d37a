// A misspelled keyword in a call is one compile error naming the keyword struct.
// expect: no known conversion for argument 2 from .*brace-enclosed initializer list.* to .*const kwfail::BlockKeywords&
#include <tracetorch/keywords.hpp>
#include <tracetorch/module.hpp>

namespace kwfail {
struct BlockKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
};
TRACETORCH_KEYWORDS(BlockKeywords, attention_mask, use_cache);
struct BlockImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& h, const BlockKeywords& kw = {}) { return h; }
};
TRACEABLE(Block);
}  // namespace kwfail

void call(kwfail::Block& block, const torch::Tensor& h) { block(h, {.atention_mask = h}); }
