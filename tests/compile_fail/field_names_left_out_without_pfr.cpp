// Field names left out where Boost.PFR cannot supply them (Boost < 1.84): one error that says
// what to do. Registered only where Boost is older than 1.84 (tests/CMakeLists.txt).
// expect: TRACETORCH_CONFIG\(NamelessConfig\) without field names needs Boost >= 1\.84
// max-errors: 1
// only-without-pfr-names
#include <tracetorch/config_struct.hpp>

#include <cstdint>

namespace nameless {
struct NamelessConfig {
  std::int64_t hidden_size = 64;
  std::int64_t num_hidden_layers = 2;
};
TRACETORCH_CONFIG(NamelessConfig);
}  // namespace nameless
