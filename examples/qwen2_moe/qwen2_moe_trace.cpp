// qwen2_moe_trace: runs the example Qwen2-MoE port under tracetorch's model addition debugger
// (tracetorch/trace_program.hpp; `qwen2_moe_trace --help` lists the flags).

#include "qwen2_moe/qwen2_moe.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<qwen2_moe::Qwen2MoeModel, qwen2_moe::Qwen2MoeConfig>(
      argc, argv, {.program = "qwen2_moe_trace", .about = "the example Qwen2-MoE (transformers' Qwen2MoeModel)", .config_default = "Qwen2MoeConfig's defaults (Qwen1.5-MoE-A2.7B's sizes)"});
}
