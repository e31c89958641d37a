// llava_trace: runs the example Llava port under tracetorch's model addition debugger
// (tracetorch/trace_program.hpp; `llava_trace --help` lists the flags).

#include "llava/llava.hpp"

#include <tracetorch/trace_program.hpp>

int main(int argc, char** argv) {
  return tracetorch::trace_main<llava::LlavaForConditionalGeneration, llava::LlavaConfig>(
      argc, argv, {.program = "llava_trace", .about = "the example Llava (transformers' LlavaForConditionalGeneration)", .config_default = "LlavaConfig's defaults (CLIP ViT-B/32, Llama 7B sizes)"});
}
