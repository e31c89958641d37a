// gemma2_trace: runs the example Gemma2 port under tracetorch's model addition debugger
// (tracetorch/trace_program.hpp; `gemma2_trace --help` lists the flags).

#include "gemma2/gemma2.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<gemma2::Gemma2Model, gemma2::Gemma2Config>(
      argc, argv, {.program = "gemma2_trace", .about = "the example Gemma2 (transformers' Gemma2Model)", .config_default = "Gemma2Config's defaults, gemma-2-2b's sizes"});
}
