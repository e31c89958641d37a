// The exact float formatting under tracetorch/python_repr.hpp (detail/repr/number_format.hpp):
// the fast path for float32 values against std::to_chars, which rounds correctly as Python does.

#include <doctest/doctest.h>

#include "tracetorch/python_repr.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

DOCTEST_TEST_CASE("the exact fast path for float32 values formats as std::to_chars (Python's correctly rounded digits)") {
  // Random bit patterns, values near powers of ten, exact decimal ties (x.5 at the last place)
  // and integers, in both notations and the precisions print uses (4, and 0 for int mode).
  std::uint32_t state = 12345;
  const auto next = [&] { return state = state * 1664525u + 1013904223u; };
  long fast = 0, mismatches = 0;
  for (int i = 0; i < 200'000; ++i) {
    float value = 0;
    switch (i % 4) {
      case 0: {
        const std::uint32_t bits = next();
        std::memcpy(&value, &bits, sizeof value);
        break;
      }
      case 1: value = std::ldexp(static_cast<float>(next() % 1'000'000) / 997.0f, static_cast<int>(next() % 60) - 40); break;
      case 2: value = static_cast<float>(static_cast<int>(next() % 2'000'001) - 1'000'000) / static_cast<float>(1 << (next() % 20)); break;
      default: value = static_cast<float>(static_cast<int>(next() % 200'001) - 100'000) * std::pow(10.0f, static_cast<float>(static_cast<int>(next() % 16) - 10));
    }
    for (const bool sci : {false, true}) {
      for (const int precision : {0, 4}) {
        char mine[64], reference[512];
        const std::size_t length = tracetorch::detail::format_float_exactly(mine, value, sci, precision);
        if (length == 0) continue;
        ++fast;
        const auto end = std::to_chars(reference, reference + sizeof reference, static_cast<double>(value),
                                       sci ? std::chars_format::scientific : std::chars_format::fixed, precision).ptr;
        if (std::string_view(mine, length) != std::string_view(reference, static_cast<std::size_t>(end - reference))) {
          if (++mismatches <= 5) DOCTEST_MESSAGE(value << " sci " << sci << " precision " << precision);
        }
      }
    }
  }
  DOCTEST_CHECK(mismatches == 0);
  DOCTEST_CHECK(fast > 400'000);  // the fast path is taken for most values
  // And where it does not apply: doubles a float cannot hold, non-finite values.
  char out[64];
  DOCTEST_CHECK(tracetorch::detail::format_float_exactly(out, 0.1, true, 4) == 0);
  DOCTEST_CHECK(tracetorch::detail::format_float_exactly(out, std::numeric_limits<double>::infinity(), true, 4) == 0);
  DOCTEST_CHECK(tracetorch::detail::format_float_exactly(out, 1e30, true, 4) == 0);
}
