// A validate hook that changes the config (not const) cannot run on a const config: one error
// saying so, instead of the hook being silently skipped.
// expect: validate_config: this config's validate hook is not const \(it changes the config\): pass a config that is not const
// max-errors: 1
#include <tracetorch/config_file.hpp>

#include <cstdint>
#include <string>

namespace cfgfail {
struct DerivingConfig {
  std::int64_t num_hidden_layers = 2;
  std::int64_t num_key_value_heads = 0;
  void validate(const std::string&) {
    if (num_key_value_heads == 0) num_key_value_heads = num_hidden_layers;
  }
};
TRACETORCH_CONFIG(DerivingConfig, num_hidden_layers, num_key_value_heads);
}  // namespace cfgfail

void check(const cfgfail::DerivingConfig& config) { tracetorch::validate_config(config, "config.json"); }
