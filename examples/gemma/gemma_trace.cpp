// gemma_trace: runs the example Gemma port under tracetorch's model addition debugger, or replays
// it against a reference trace (tracetorch/trace_program.hpp; `gemma_trace --help` lists the flags).
// The fixture's checkpoint is bfloat16: converted into the float32 port, as gemma::load_state_dict does.

#include "gemma/gemma.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<gemma::GemmaModel, gemma::GemmaConfig>(
      argc, argv,
      {.program = "gemma_trace",
       .about = "the example Gemma (transformers' GemmaModel)",
       .config_default = "GemmaConfig's defaults, gemma-7b",
       .checkpoint = {.dtype = tracetorch::checkpoint::DtypePolicy::convert}});
}
