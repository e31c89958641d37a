// TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES leaves TRACEABLE undefined (tracetorch/config.hpp):
// TRACETORCH_TRACEABLE still declares a traced module, the short name is an unknown identifier.
// expect: no_short_macro_names.cpp:16:[0-9]+: error: expected constructor, destructor, or type conversion
#define TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES
#include <tracetorch/module.hpp>

struct LongNameImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
TRACETORCH_TRACEABLE(LongName);
static_assert(tracetorch::is_traceable_v<LongName>);

struct ShortNameImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
TRACEABLE(ShortName);
