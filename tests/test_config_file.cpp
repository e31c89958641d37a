// tracetorch/config_file.hpp: a transformers config.json read key by key into a port's config.

#include <doctest/doctest.h>

#include <tracetorch/config_file.hpp>

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "test_helpers.hpp"

namespace {

/// What ConfigFile(text, "config.json").read(key, field) throws, or "" when it does not.
template <class T>
std::string config_error(const std::string& text, const char* key, T& field) {
  try {
    tracetorch::ConfigFile("{\"" + std::string(key) + "\": " + text + "}", "config.json").read(key, field);
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

DOCTEST_TEST_CASE("config file: each field type read from its JSON value; an absent key keeps the default") {
  const tracetorch::ConfigFile file(
      R"({"vocab_size": 32, "rms_norm_eps": 1e-06, "rope_theta": 10000, "attention_bias": true, "hidden_act": "gelu",
          "pad_token_id": null, "eos_token_id": 1, "architectures": ["GemmaForCausalLM"], "layer_types": [1, 2],
          "flags": [true, false]})",
      "config.json");
  std::int64_t vocab_size = 0, missing = 7;
  double eps = 0, theta = 0;
  bool bias = false;
  std::string act;
  std::optional<std::int64_t> pad = 5, eos;
  std::vector<std::string> architectures;
  std::vector<int> layer_types;
  std::vector<bool> flags;
  DOCTEST_CHECK(file.read("vocab_size", vocab_size));
  DOCTEST_CHECK(vocab_size == 32);
  DOCTEST_CHECK(file.read("rms_norm_eps", eps));
  DOCTEST_CHECK(eps == 1e-6);
  DOCTEST_CHECK(file.read("rope_theta", theta));  // an integer where a number is wanted: Python's int is a number
  DOCTEST_CHECK(theta == 10000.0);
  DOCTEST_CHECK(file.read("attention_bias", bias));
  DOCTEST_CHECK(bias);
  DOCTEST_CHECK(file.read("hidden_act", act));
  DOCTEST_CHECK(act == "gelu");
  DOCTEST_CHECK(file.read("pad_token_id", pad));  // null: nullopt, as Python's None
  DOCTEST_CHECK_FALSE(pad.has_value());
  DOCTEST_CHECK(file.read("eos_token_id", eos));
  DOCTEST_CHECK(eos == 1);
  DOCTEST_CHECK(file.read("architectures", architectures));
  DOCTEST_CHECK(architectures == std::vector<std::string>{"GemmaForCausalLM"});
  DOCTEST_CHECK(file.read("layer_types", layer_types));
  DOCTEST_CHECK(layer_types == std::vector<int>{1, 2});
  DOCTEST_CHECK(file.read("flags", flags));
  DOCTEST_CHECK(flags == std::vector<bool>{true, false});
  DOCTEST_CHECK_FALSE(file.read("num_hidden_layers", missing));
  DOCTEST_CHECK(missing == 7);
  DOCTEST_CHECK(file.has("eos_token_id"));
  DOCTEST_CHECK_FALSE(file.has("pad_token_id"));  // present but null
  DOCTEST_CHECK_FALSE(file.has("num_hidden_layers"));
}

DOCTEST_TEST_CASE("config file: a value of the wrong type or range names the file and key, the field unchanged") {
  std::int64_t size = 3;
  DOCTEST_CHECK(config_error("\"12\"", "head_dim", size) == "tracetorch: config.json: \"head_dim\" must be an integer");
  DOCTEST_CHECK(config_error("2.0", "head_dim", size) == "tracetorch: config.json: \"head_dim\" must be an integer");
  DOCTEST_CHECK(config_error("18446744073709551615", "vocab_size", size) ==
                "tracetorch: config.json: \"vocab_size\" is 18446744073709551615, too large");
  DOCTEST_CHECK(size == 3);
  std::int32_t narrow = 1;
  DOCTEST_CHECK(config_error("4294967296", "n_head", narrow) == "tracetorch: config.json: \"n_head\" is 4294967296, out of range");
  std::uint32_t unsigned_field = 1;
  DOCTEST_CHECK(config_error("-1", "n_layer", unsigned_field) == "tracetorch: config.json: \"n_layer\" is -1, out of range");
  double number = 0.5;
  DOCTEST_CHECK(config_error("\"1e-6\"", "rms_norm_eps", number) == "tracetorch: config.json: \"rms_norm_eps\" must be a number");
  bool flag = false;
  DOCTEST_CHECK(config_error("1", "use_cache", flag) == "tracetorch: config.json: \"use_cache\" must be true or false");
  std::string text = "kept";
  DOCTEST_CHECK(config_error("null", "hidden_act", text) == "tracetorch: config.json: \"hidden_act\" must be a string");
  DOCTEST_CHECK(text == "kept");
  std::vector<std::int64_t> list{9};
  DOCTEST_CHECK(config_error("[1, \"2\"]", "sizes", list) == "tracetorch: config.json: \"sizes\" [1] must be an integer");
  DOCTEST_CHECK(list == std::vector<std::int64_t>{9});
  const tracetorch::ConfigFile file(R"({"rope_scaling": {"type": "linear"}})", "config.json");
  DOCTEST_CHECK_THROWS_WITH_AS(file.fail("rope_scaling", "must be null: only the default rope is ported"),
                               "tracetorch: config.json: \"rope_scaling\" must be null: only the default rope is ported",
                               tracetorch::Error);
}

DOCTEST_TEST_CASE("config file: a file that is missing, not JSON, not an object or not a regular file is refused by name") {
  tracetorch_test::TempDir dir;
  const auto refused = [](const std::filesystem::path& path) -> std::string {
    try {
      tracetorch::ConfigFile{path};
    } catch (const tracetorch::Error& e) {
      return e.what();
    }
    return "(read)";
  };
  DOCTEST_CHECK(refused(dir / "missing.json").find("missing.json: cannot open") != std::string::npos);
  std::ofstream(dir / "broken.json") << "{\"hidden_size\": 64,";
  DOCTEST_CHECK(refused(dir / "broken.json").find("broken.json is not valid JSON") != std::string::npos);
  std::ofstream(dir / "list.json") << "[1, 2]";
  DOCTEST_CHECK(refused(dir / "list.json").find("list.json must hold a JSON object") != std::string::npos);
  DOCTEST_CHECK(refused(dir.path()).find("is a directory") != std::string::npos);
  DOCTEST_REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
  DOCTEST_CHECK(refused(dir / "fifo.json").find("FIFO") != std::string::npos);  // refused unread: no hang
  std::ofstream(dir / "config.json") << R"({"num_hidden_layers": 2})";
  std::int64_t layers = 0;
  DOCTEST_CHECK(tracetorch::ConfigFile(dir / "config.json").read("num_hidden_layers", layers));
  DOCTEST_CHECK(layers == 2);
}
