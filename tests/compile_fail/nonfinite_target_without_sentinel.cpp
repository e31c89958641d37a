// Setting find_nonfinite without the sentinel's header is one error that names the header
// (model headers declare OutputOptions but leave the sentinel out, for their compile cost).
// expect: find_nonfinite is served by the sentinel: #include <tracetorch/nonfinite.hpp>
#include <tracetorch/capture.hpp>

#include <optional>

tracetorch::OutputOptions options_finding(std::optional<tracetorch::NonFinite>& found) {
  return {.find_nonfinite = &found};
}
