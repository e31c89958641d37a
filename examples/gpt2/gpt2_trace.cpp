// gpt2_trace: runs the example GPT-2 port under tracetorch's model addition debugger, or replays
// it against a reference trace (tracetorch/trace_program.hpp; `gpt2_trace --help` lists the flags).

#include "gpt2/gpt2.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<gpt2::GPT2Model, gpt2::GPT2Config>(
      argc, argv,
      {.program = "gpt2_trace",
       .about = "the example GPT-2 (transformers' GPT2Model)",
       .config_default = "GPT2Config's defaults, gpt2"});
}
