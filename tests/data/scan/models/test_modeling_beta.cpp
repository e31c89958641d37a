// Fixture: a tester in a namespace, with no skip list: it runs every common test.
#include <doctest/doctest.h>
#include <tracetorch/testing.hpp>

namespace fixtures {
struct BetaTester {
  static constexpr const char* model_name = "BetaModel";
  char quote = '"';  // a character literal holding a quote does not open a string
};
}  // namespace fixtures

TRACETORCH_COMMON_MODEL_TESTS(fixtures::BetaTester);
