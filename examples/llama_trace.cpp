// llama_trace: runs the example Llama port under tracetorch's model addition debugger and
// writes a transformers-compatible trace, or replays it against a reference trace
// (tracetorch/trace_program.hpp; `llama_trace --help` lists the flags).

#include "llama/llama.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<llama::LlamaModel, llama::LlamaConfig>(
      argc, argv,
      {.program = "llama_trace",
       .about = "the example Llama (transformers' module names)",
       .config_default = "seed 004's config, hidden 2048, 16 layers"});
}
