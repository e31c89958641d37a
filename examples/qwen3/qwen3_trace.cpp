// qwen3_trace: runs the example Qwen3 port under tracetorch's model addition debugger
// (tracetorch/trace_program.hpp; `qwen3_trace --help` lists the flags).

#include "qwen3/qwen3.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<qwen3::Qwen3Model, qwen3::Qwen3Config>(
      argc, argv, {.program = "qwen3_trace", .about = "the example Qwen3 (transformers' Qwen3Model)", .config_default = "Qwen3Config's defaults, Qwen3-8B's sizes"});
}
