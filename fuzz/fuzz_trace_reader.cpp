// libFuzzer target: the trace JSON reader behind tracetorch-diff (detail::TraceParser) and
// the parser of printed tensor values, on arbitrary text. Any input must either be refused
// with tracetorch::Error or give calls whose values are well formed.

#include <tracetorch/detail/trace_format/printed_numbers.hpp>
#include <tracetorch/detail/trace_format/reader.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<tracetorch::detail::PrintedNumber> numbers;
  try {
    const auto trace = tracetorch::detail::TraceParser("fuzz.json").parse(text);
    for (const auto& call : trace.calls) {
      if (call.module_path.empty() && call.inputs.empty() && call.outputs.empty() && call.exit_order == 0) continue;
      for (const auto* slots : {&call.inputs, &call.outputs}) {
        for (const auto& slot : *slots) {
          if (slot.order >= call.exit_order && slots == &call.inputs) __builtin_trap();  // inputs come before the return
          if (slot.is_tensor && slot.file.empty()) tracetorch::detail::parse_printed_numbers(slot.lines, numbers);
          if (!slot.file.empty() && slot.file.find('/') != std::string::npos && !slot.file.starts_with("./")) __builtin_trap();
        }
      }
    }
  } catch (const tracetorch::Error&) {
  }
  // The printed-values parser alone, on the input's lines.
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      lines.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (tracetorch::detail::parse_printed_numbers(lines, numbers)) {
    for (const auto& n : numbers) {
      if (!(n.half_unit >= 0)) __builtin_trap();
    }
  }
  return 0;
}
