// A config key that is not a field of the struct (here misspelled) is one error naming it, even
// where the config is read.
// expect: TRACETORCH_CONFIG\(TinyConfig, \.\.\.\): hiden_size is not a member of the struct
// max-errors: 1
#include <tracetorch/config_file.hpp>

#include <cstdint>

namespace cfgfail {
struct TinyConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
};
TRACETORCH_CONFIG(TinyConfig, vocab_size, hiden_size);
}  // namespace cfgfail

cfgfail::TinyConfig read_tiny(const tracetorch::ConfigFile& file) {
  cfgfail::TinyConfig config;
  tracetorch::read_config(file, config);
  return config;
}
