#pragma once
/// \file
/// A transformers `config.json` read into a port's own config struct. Declared once, after the
/// struct, `TRACETORCH_CONFIG(Type, field...)` lists the fields (in declaration order, every one:
/// checked at compile time) and gives reading, writing back, setting a field by name, and the
/// struct's `validate` hook:
///
/// \code
/// struct VisionConfig {
///   std::int64_t hidden_size = 768;
///   std::int64_t num_hidden_layers = 12;
/// };
/// TRACETORCH_CONFIG(VisionConfig, hidden_size, num_hidden_layers);
///
/// struct LlavaConfig {
///   VisionConfig vision_config;                        // a nested object: "vision_config.hidden_size"
///   std::int64_t image_token_index = 32000;
///   std::vector<std::int64_t> vision_feature_layers;   // a list
///   std::map<std::string, double> rope_scaling;        // an object read as a map
///   void validate(const std::string& where) const;     // optional: called after every read
/// };
/// TRACETORCH_CONFIG(LlavaConfig, vision_config, image_token_index, vision_feature_layers, rope_scaling);
///
/// tracetorch::ConfigReport report;
/// auto config = tracetorch::load_config<LlavaConfig>("config.json", &report);  // unknown keys in report
/// tracetorch::set_config_field(config, "vision_config.hidden_size", "32");    // a Python literal
/// boost::json::object json = tracetorch::config_to_json(config);
/// \endcode
///
/// Or key by key, for a config that needs its own rules:
///
/// \code
/// GemmaConfig config;                                    // upstream's defaults
/// const tracetorch::ConfigFile file("config.json");      // read and parsed; errors name the file
/// file.read("vocab_size", config.vocab_size);            // std::int64_t: absent keeps the default
/// file.read("rms_norm_eps", config.rms_norm_eps);        // double
/// file.read("hidden_act", config.hidden_act);            // std::string
/// file.read("pad_token_id", config.pad_token_id);        // std::optional<std::int64_t>: null is nullopt
/// \endcode

#include <boost/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/config/config_struct.hpp"
#include "tracetorch/detail/config/config_value.hpp"
#include "tracetorch/detail/config/python_literal.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/config_struct.hpp"
#include "tracetorch/error.hpp"

namespace tracetorch {

class ConfigFile {
 public:
  /// Reads and parses `path`: a regular file of at most 16 MiB (a FIFO or device is refused
  /// unread) holding one JSON object. Throws Error naming the file otherwise.
  explicit ConfigFile(const std::filesystem::path& path)
      : ConfigFile(detail::read_regular_file(path, detail::kMaxConfigBytes, "a config.json"), path.string()) {}

  /// Parses `text`; `name` stands for the file in messages.
  ConfigFile(std::string_view text, std::string name) : name_(std::move(name)) {
    boost::system::error_code ec;
    boost::json::value parsed = boost::json::parse(text, ec);
    if (ec) throw Error("tracetorch: " + name_ + " is not valid JSON: " + ec.message());
    if (!parsed.is_object()) throw Error("tracetorch: " + name_ + " must hold a JSON object");
    object_ = std::move(parsed.as_object());
  }

  /// Sets `field` from `key` when the file has it (true), else leaves it (false), as
  /// transformers' PretrainedConfig keeps a default. `field` is bool, an integer, a floating
  /// point number, std::string, or a std::optional (null: nullopt) or std::vector of those.
  /// A value of another type or out of the field's range throws Error "FILE: "key" must be an
  /// integer" and leaves `field` unchanged.
  template <detail::ConfigField T>
  bool read(std::string_view key, T& field) const {
    const boost::json::value* value = object_.if_contains(key);
    if (value == nullptr) return false;
    if (auto why = detail::convert_config_value(*value, field)) fail(key, *why);
    return true;
  }

  /// Whether the file has `key` with a value other than null.
  bool has(std::string_view key) const {
    const boost::json::value* value = object_.if_contains(key);
    return value != nullptr && !value->is_null();
  }

  /// Throws Error "tracetorch: FILE: "key" what" (a port's own check of a value it read).
  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw Error("tracetorch: " + name_ + ": \"" + std::string(key) + "\" " + what);
  }

  /// Throws Error "tracetorch: FILE: what": a port's check of values that no one key holds
  /// (sizes that overflow together, or need more memory than the machine has).
  ///
  /// \code
  /// if (config.hidden_size % config.num_attention_heads != 0)
  ///   file.fail("hidden_size", "is not a multiple of \"num_attention_heads\"");
  /// if (!fits) file.fail("the sizes need about 3725.3 GiB, more than this machine's 23.5 GiB: refused");
  /// \endcode
  [[noreturn]] void fail(const std::string& what) const { throw Error("tracetorch: " + name_ + ": " + what); }

  /// Runs `check()`, a port's own validation of what it read, and gives any tracetorch::Error it
  /// throws this file's name ("tracetorch: FILE: <its message>") where the message lacks it, so
  /// that a check written without the file (a port's validate(), a memory estimate) names it.
  ///
  /// \code
  /// file.checked([&] { config.validate(); check_fits_in_memory(config, batch, seq); });
  /// \endcode
  template <class Check>
  void checked(Check&& check) const {
    try {
      std::forward<Check>(check)();
    } catch (const Error& error) {
      const std::string_view message = error.what();
      if (message.find(name_) != std::string_view::npos) throw;
      fail(std::string(message.starts_with("tracetorch: ") ? message.substr(12) : message));
    }
  }

  /// The file's name as messages give it, and everything it holds.
  const std::string& name() const noexcept { return name_; }
  const boost::json::object& object() const noexcept { return object_; }

 private:
  std::string name_;
  boost::json::object object_;
};

/// What reading a config found besides its fields.
struct ConfigReport {
  /// The file's keys that no field takes, full ("vision_config.projection_dim"), in the file's
  /// order: upstream keys the port does not read (`sliding_window`, `layer_types`), or typos.
  std::vector<std::string> unknown_keys;

  /// "config.json: 2 keys no field takes: sliding_window, layer_types", or "" when none.
  std::string describe(std::string_view file = "config.json") const {
    if (unknown_keys.empty()) return "";
    std::string text = std::string(file) + ": " + std::to_string(unknown_keys.size()) +
                       (unknown_keys.size() == 1 ? " key" : " keys") + " no field takes: ";
    for (std::size_t i = 0; i < unknown_keys.size(); ++i) text += (i == 0 ? "" : ", ") + unknown_keys[i];
    return text;
  }
};

/// Whether `full_key` is a key of transformers' configs that no model's forward reads, at any
/// depth (`vision_config.model_type`): its bookkeeping (`architectures`, `model_type`, `dtype`,
/// `torch_dtype`, `transformers_version`, `_name_or_path`), and what only generate(), weight
/// initialization and tying read (`bos_token_id`, `eos_token_id`, `initializer_range`,
/// `tie_word_embeddings`).
inline bool is_upstream_key_no_forward_reads(std::string_view full_key) noexcept {
  const auto dot = full_key.rfind('.');
  const std::string_view name = dot == std::string_view::npos ? full_key : full_key.substr(dot + 1);
  for (const std::string_view key : {"architectures", "model_type", "dtype", "torch_dtype", "transformers_version",
                                     "_name_or_path", "bos_token_id", "eos_token_id", "initializer_range",
                                     "tie_word_embeddings"}) {
    if (name == key) return true;
  }
  return false;
}

/// How read_config treats keys no field takes.
struct ConfigReadOptions {
  /// Throw Error (ConfigReport::describe's text) instead of reporting them.
  bool refuse_unknown_keys = false;
  /// Full keys the port leaves unread on purpose: neither reported nor refused.
  std::vector<std::string> ignored_keys = {};
  /// Report (or refuse) the keys no forward reads too (is_upstream_key_no_forward_reads), which a
  /// read otherwise leaves out, so that a report lists only keys a port could have missed.
  bool report_keys_no_forward_reads = false;
};

/// Calls `config.validate(where)` where the struct has it, nested config structs first: the hook
/// read_config and load_config run. A hook may be const (`void validate(const std::string&)
/// const`: checks) or not (checks that also derive fields, as Qwen3's fills `layer_types`); a
/// hook that is not const needs `config` not const, and a const one is a compile error naming it.
template <class Config>
void validate_config(Config& config, const std::string& where) {
  tracetorch_config(config, [&](std::string_view name, auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (detail::is_config_struct<F>) validate_config(field, where + ": " + std::string(name));
  });
  if constexpr (requires { config.validate(where); }) {
    config.validate(where);
  } else {
    static_assert(!requires(std::remove_const_t<Config>& changeable) { changeable.validate(where); },
                  "validate_config: this config's validate hook is not const (it changes the config): pass a config that is not const");
  }
}

/// Reads every field TRACETORCH_CONFIG lists from `file` into `config`: an absent key keeps the
/// default, a nested object fills a nested config struct; a wrong type or range throws Error
/// naming the file and the full key (`config.json: "vision_config.hidden_size" must be an
/// integer`) and leaves `config` unchanged. Then runs the validate hook.
template <detail::is_config_struct Config>
ConfigReport read_config(const ConfigFile& file, Config& config, const ConfigReadOptions& options = {}) {
  ConfigReport report;
  detail::ConfigReadState state{file.name(), report.unknown_keys};
  Config read = config;
  detail::read_config_object(file.object(), read, "", state);
  std::erase_if(report.unknown_keys, [&](const std::string& key) {
    return std::find(options.ignored_keys.begin(), options.ignored_keys.end(), key) != options.ignored_keys.end() ||
           (!options.report_keys_no_forward_reads && is_upstream_key_no_forward_reads(key));
  });
  if (options.refuse_unknown_keys && !report.unknown_keys.empty()) throw Error("tracetorch: " + report.describe(file.name()));
  validate_config(read, file.name());
  config = std::move(read);
  return report;
}

/// A `Config` with its defaults, then read_config from `path` (bounded; a FIFO refused unread).
/// The unknown keys go to `report` when given.
template <detail::is_config_struct Config>
Config load_config(const std::filesystem::path& path, ConfigReport* report = nullptr, const ConfigReadOptions& options = {}) {
  Config config;
  ConfigReport found = read_config(ConfigFile(path), config, options);
  if (report != nullptr) *report = std::move(found);
  return config;
}

/// The config as a transformers config.json holds it: every listed field, nested structs as
/// objects, nullopt as null. `ConfigFile(serialize(config_to_json(c)), ...)` reads back `c`.
template <detail::is_config_struct Config>
boost::json::object config_to_json(const Config& config) {
  return detail::config_to_json_object(config);
}

/// Sets the field at `key` ("num_hidden_layers", "vision_config.hidden_size",
/// "rope_scaling.factor" in a map) from `literal`, a Python literal or JSON ("32", "True",
/// "None", "'gelu'", "[1, 2]", "{'factor': 8.0}"), converted as a config.json value would be.
/// An unknown key or a wrong type throws Error naming `where` and the key ("tracetorch:
/// set_config_field: \"hiden_size\" names no field ..."), the config unchanged. Run
/// validate_config afterwards where the port has a validate hook.
template <detail::is_config_struct Config>
void set_config_field(Config& config, std::string_view key, std::string_view literal, std::string_view where_set = "set_config_field") {
  const boost::json::value value = detail::parse_python_literal_as_json(literal);
  const std::string where(where_set);
  std::vector<std::string> unused;
  detail::ConfigReadState state{where, unused};
  Config changed = config;
  detail::set_config_field_at(changed, key, value, std::string(key), state);
  config = std::move(changed);
}

}  // namespace tracetorch
