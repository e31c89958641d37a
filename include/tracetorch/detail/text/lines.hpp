#pragma once
/// \file
/// Splitting text into lines at '\n', the one line break a repr holds.

#include <cstddef>
#include <string_view>

namespace tracetorch::detail {

/// Calls `line(std::string_view)` for each line of `text`, split at '\n' (a repr has no other
/// line breaks, so this is str.splitlines() for it).
template <class LineFn>
void for_each_line(std::string_view text, LineFn&& line) {
  for (std::size_t start = 0;;) {
    const auto end = text.find('\n', start);
    if (end == std::string_view::npos) {
      line(text.substr(start));
      return;
    }
    line(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace tracetorch::detail
