#pragma once
/// \file
/// A transformers `config.json`, read key by key into a port's own config struct: what every
/// port writes by hand otherwise (the Llama, GPT-2 and Gemma examples use it).
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

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tracetorch/detail/io/config_value.hpp"
#include "tracetorch/detail/io/read_file.hpp"
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

}  // namespace tracetorch
