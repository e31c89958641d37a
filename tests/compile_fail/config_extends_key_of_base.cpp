// A config that extends another lists only its own fields: a key of the base listed again would
// be read twice, and is one error naming it.
// expect: TRACETORCH_CONFIG_EXTENDS\(WindowConfig, BaseConfig, \.\.\.\): hidden_size is a key of the base already
// max-errors: 1
#include <tracetorch/config_file.hpp>

#include <cstdint>

namespace cfgfail {
struct BaseConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
};
TRACETORCH_CONFIG(BaseConfig, vocab_size, hidden_size);

struct WindowConfig : BaseConfig {
  std::int64_t sliding_window = 4096;
};
TRACETORCH_CONFIG_EXTENDS(WindowConfig, BaseConfig, sliding_window, hidden_size);
}  // namespace cfgfail

cfgfail::WindowConfig read_window(const tracetorch::ConfigFile& file) {
  cfgfail::WindowConfig config;
  tracetorch::read_config(file, config);
  return config;
}
