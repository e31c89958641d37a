// llama_trace: runs the example Llama port under tracetorch's model addition debugger and
// writes a transformers-compatible trace, or replays it against a reference trace
// (tracetorch/trace_program.hpp; `llama_trace --help` lists the flags). Built with c10d
// (TRACETORCH_WITH_C10D), `--world-size N` runs the tensor-parallel port (examples/llama_tp) on N
// ranks, each tracing (tracetorch/distributed.hpp).

#include "llama/llama.hpp"

#include <tracetorch/trace_program.hpp>

#ifdef LLAMA_TRACE_TENSOR_PARALLEL
#include "llama_tp/llama_tp.hpp"

#include <tracetorch/distributed.hpp>
#endif

int main(int argc, char** argv) {
  const tracetorch::TraceProgramOptions options{.program = "llama_trace",
                                                .about = "the example Llama (transformers' module names)",
                                                .config_default = "seed 004's config, hidden 2048, 16 layers"};
#ifdef LLAMA_TRACE_TENSOR_PARALLEL
  if (tracetorch::tensor_parallel_requested(argc, argv)) {
    return tracetorch::parallel_trace_main<llama_tp::LlamaModel, llama_tp::LlamaConfig>(
        argc, argv, options, {.extend_layout = llama_tp::add_local_modules});
  }
#endif
  return tracetorch::trace_main<llama::LlamaModel, llama::LlamaConfig>(argc, argv, options);
}
