// tracetorch/config_file.hpp's TRACETORCH_CONFIG: a config struct declared once, read from a
// transformers config.json with nested objects and lists, unknown keys reported, written back,
// set by name from a Python literal, validated by its hook.

#include <doctest/doctest.h>

#include <tracetorch/config_file.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_helpers.hpp"

namespace cfgtest {

struct VisionConfig {
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::string hidden_act = "quick_gelu";
};
TRACETORCH_CONFIG(VisionConfig, hidden_size, num_hidden_layers, hidden_act);

struct RopeParameters {
  std::string rope_type = "default";
  double rope_theta = 10000.0;
  std::optional<double> factor;
};
TRACETORCH_CONFIG(RopeParameters, rope_type, rope_theta, factor);

/// A Llava-like config: nested objects (a struct, an optional struct, a map), lists.
struct LlavaConfig {
  VisionConfig vision_config;
  std::optional<VisionConfig> text_config;
  std::int64_t image_token_index = 32000;
  std::vector<std::int64_t> vision_feature_layers = {-2};
  RopeParameters rope_parameters;
  std::map<std::string, double> rope_scaling;
  std::vector<VisionConfig> towers;
  std::optional<std::int64_t> pad_token_id = 0;

  /// The hook read_config runs after a read: a port's own rules, naming the file.
  void validate(const std::string& where) const {
    if (image_token_index < 0) throw tracetorch::Error(where + ": image_token_index must be >= 0");
  }
};
TRACETORCH_CONFIG(LlavaConfig, vision_config, text_config, image_token_index, vision_feature_layers, rope_parameters,
                  rope_scaling, towers, pad_token_id);

/// What read_config throws for `text`, or "" when it does not.
template <class Config>
std::string read_error(const std::string& text, Config& config) {
  try {
    tracetorch::read_config(tracetorch::ConfigFile(text, "config.json"), config);
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace cfgtest

DOCTEST_TEST_CASE("config: nested objects, lists and maps read from one declaration; absent keys keep defaults") {
  const tracetorch::ConfigFile file(R"({"vision_config": {"hidden_size": 32, "hidden_act": "gelu"},
      "text_config": {"num_hidden_layers": 2}, "vision_feature_layers": [-1, -3],
      "rope_parameters": {"rope_type": "llama3", "factor": 8}, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1},
      "towers": [{"hidden_size": 4}, {}], "pad_token_id": null})",
                                    "config.json");
  cfgtest::LlavaConfig config;
  const tracetorch::ConfigReport report = tracetorch::read_config(file, config);
  DOCTEST_CHECK(report.unknown_keys.empty());
  DOCTEST_CHECK(config.vision_config.hidden_size == 32);
  DOCTEST_CHECK(config.vision_config.num_hidden_layers == 12);  // absent inside the object: default
  DOCTEST_CHECK(config.vision_config.hidden_act == "gelu");
  DOCTEST_REQUIRE(config.text_config.has_value());
  DOCTEST_CHECK(config.text_config->num_hidden_layers == 2);
  DOCTEST_CHECK(config.text_config->hidden_size == 768);
  DOCTEST_CHECK(config.image_token_index == 32000);
  DOCTEST_CHECK(config.vision_feature_layers == std::vector<std::int64_t>{-1, -3});
  DOCTEST_CHECK(config.rope_parameters.rope_type == "llama3");
  DOCTEST_CHECK(config.rope_parameters.rope_theta == 10000.0);
  DOCTEST_CHECK(config.rope_parameters.factor == 8.0);
  DOCTEST_CHECK(config.rope_scaling == std::map<std::string, double>{{"factor", 8.0}, {"low_freq_factor", 1.0}});
  DOCTEST_REQUIRE(config.towers.size() == 2);
  DOCTEST_CHECK(config.towers[0].hidden_size == 4);
  DOCTEST_CHECK(config.towers[1].hidden_size == 768);
  DOCTEST_CHECK_FALSE(config.pad_token_id.has_value());
}

DOCTEST_TEST_CASE("config: a wrong type inside a nested object names the file and the full key, the config unchanged") {
  cfgtest::LlavaConfig config;
  DOCTEST_CHECK(cfgtest::read_error(R"({"image_token_index": 5, "vision_config": {"hidden_size": "32"}})", config) ==
                "tracetorch: config.json: \"vision_config.hidden_size\" must be an integer");
  DOCTEST_CHECK(config.image_token_index == 32000);  // nothing of the failed read kept
  DOCTEST_CHECK(cfgtest::read_error(R"({"towers": [{}, {"num_hidden_layers": 1.5}]})", config) ==
                "tracetorch: config.json: \"towers[1].num_hidden_layers\" must be an integer");
  DOCTEST_CHECK(cfgtest::read_error(R"({"rope_scaling": {"factor": "8"}})", config) ==
                "tracetorch: config.json: \"rope_scaling.factor\" must be a number");
  DOCTEST_CHECK(cfgtest::read_error(R"({"vision_config": [1]})", config) ==
                "tracetorch: config.json: \"vision_config\" must be an object");
  DOCTEST_CHECK(cfgtest::read_error(R"({"image_token_index": -1})", config) == "config.json: image_token_index must be >= 0");
  DOCTEST_CHECK(config.image_token_index == 32000);
  DOCTEST_CHECK(config.towers.empty());
}

DOCTEST_TEST_CASE("config: keys no field takes are reported with their full key, ignored on request, or refused") {
  const tracetorch::ConfigFile file(
      R"({"sliding_window": 4096, "vision_config": {"projection_dim": 8, "hidden_size": 16}, "layer_types": ["full"]})",
      "config.json");
  cfgtest::LlavaConfig config;
  const auto report = tracetorch::read_config(file, config);
  DOCTEST_CHECK(report.unknown_keys == std::vector<std::string>{"sliding_window", "vision_config.projection_dim", "layer_types"});
  DOCTEST_CHECK(report.describe() ==
                "config.json: 3 keys no field takes: sliding_window, vision_config.projection_dim, layer_types");
  DOCTEST_CHECK(config.vision_config.hidden_size == 16);

  const auto ignoring = tracetorch::read_config(file, config, {.ignored_keys = {"sliding_window", "layer_types"}});
  DOCTEST_CHECK(ignoring.unknown_keys == std::vector<std::string>{"vision_config.projection_dim"});

  cfgtest::LlavaConfig untouched;
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::read_config(file, untouched, {.refuse_unknown_keys = true}),
                               "tracetorch: config.json: 3 keys no field takes: sliding_window, "
                               "vision_config.projection_dim, layer_types",
                               tracetorch::Error);
  DOCTEST_CHECK(untouched.vision_config.hidden_size == 768);
}

DOCTEST_TEST_CASE("config: written back to JSON and read again; a file read by load_config, FIFO-safe through ConfigFile") {
  cfgtest::LlavaConfig config;
  config.vision_config.hidden_size = 8;
  config.text_config = cfgtest::VisionConfig{.hidden_size = 4};
  config.rope_scaling = {{"factor", 2.0}};
  config.towers = {cfgtest::VisionConfig{.num_hidden_layers = 1}};
  config.pad_token_id.reset();
  const boost::json::object json = tracetorch::config_to_json(config);
  DOCTEST_CHECK(json.at("vision_config").at("hidden_size") == 8);
  DOCTEST_CHECK(json.at("pad_token_id").is_null());
  DOCTEST_CHECK(json.at("rope_parameters").at("factor").is_null());

  tracetorch_test::TempDir dir;
  std::ofstream(dir / "config.json") << boost::json::serialize(json);
  tracetorch::ConfigReport report;
  const auto again = tracetorch::load_config<cfgtest::LlavaConfig>(dir / "config.json", &report);
  DOCTEST_CHECK(report.unknown_keys.empty());
  DOCTEST_CHECK(tracetorch::config_to_json(again) == json);
  DOCTEST_CHECK(again.text_config->hidden_size == 4);
  DOCTEST_CHECK(again.towers.at(0).num_hidden_layers == 1);
  DOCTEST_CHECK_THROWS_AS(tracetorch::load_config<cfgtest::LlavaConfig>(dir / "missing.json"), tracetorch::Error);
}

DOCTEST_TEST_CASE("config: a field set by name from a Python literal, with the read's rules") {
  cfgtest::LlavaConfig config;
  tracetorch::set_config_field(config, "image_token_index", "7");
  tracetorch::set_config_field(config, "vision_config.hidden_act", "'gelu_new'");
  tracetorch::set_config_field(config, "text_config.hidden_size", "64");  // an absent optional struct is made
  tracetorch::set_config_field(config, "vision_feature_layers", "(-1, -2,)");
  tracetorch::set_config_field(config, "rope_scaling.factor", "8.0");
  tracetorch::set_config_field(config, "rope_parameters", "{'rope_type': 'yarn', 'factor': None}");
  tracetorch::set_config_field(config, "pad_token_id", "None");
  DOCTEST_CHECK(config.image_token_index == 7);
  DOCTEST_CHECK(config.vision_config.hidden_act == "gelu_new");
  DOCTEST_CHECK(config.text_config->hidden_size == 64);
  DOCTEST_CHECK(config.vision_feature_layers == std::vector<std::int64_t>{-1, -2});
  DOCTEST_CHECK(config.rope_scaling.at("factor") == 8.0);
  DOCTEST_CHECK(config.rope_parameters.rope_type == "yarn");
  DOCTEST_CHECK_FALSE(config.rope_parameters.factor.has_value());
  DOCTEST_CHECK_FALSE(config.pad_token_id.has_value());

  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::set_config_field(config, "vision_config.hiden_size", "1"),
                               "tracetorch: set_config_field: \"vision_config.hiden_size\" names no field (known here: "
                               "hidden_size, num_hidden_layers, hidden_act)",
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::set_config_field(config, "vision_config.hidden_size", "True"),
                               "tracetorch: set_config_field: \"vision_config.hidden_size\" must be an integer",
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(tracetorch::set_config_field(config, "image_token_index", "seven"), tracetorch::Error);
  DOCTEST_CHECK(config.vision_config.hidden_size == 768);
  DOCTEST_CHECK(config.image_token_index == 7);
}

namespace cfgtest {
/// A port's size rules through check_positive/check_not_negative, each key named once.
struct SizesConfig {
  std::int64_t hidden_size = 64;
  std::int64_t num_hidden_layers = 2;
  std::optional<std::int64_t> head_dim;
  double rms_norm_eps = 1e-6;
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(SizesConfig, hidden_size, num_hidden_layers, head_dim, rms_norm_eps);

// After TRACETORCH_CONFIG, as config_file.md says: the keys come from its list.
void SizesConfig::validate(const std::string& where) const {
  tracetorch::check_positive(*this, "toy: " + where, hidden_size, head_dim, rms_norm_eps);
  tracetorch::check_not_negative(*this, "toy: " + where, num_hidden_layers);
}

std::string sizes_error(const std::string& text) {
  SizesConfig config;
  return read_error(text, config);
}
}  // namespace cfgtest

DOCTEST_TEST_CASE("config: check_positive and check_not_negative name the key from TRACETORCH_CONFIG's list") {
  DOCTEST_CHECK(cfgtest::sizes_error("{}").empty());
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"head_dim": 8, "num_hidden_layers": 0})").empty());
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"hidden_size": 0})") == "toy: config.json: hidden_size is 0: sizes must be positive");
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"head_dim": -4})") == "toy: config.json: head_dim is -4: sizes must be positive");
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"rms_norm_eps": 0.0})") == "toy: config.json: rms_norm_eps must be a finite number > 0");
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"num_hidden_layers": -1})") == "toy: config.json: num_hidden_layers is -1: it must be >= 0");
  // The first failing field in the call's order is the one named.
  DOCTEST_CHECK(cfgtest::sizes_error(R"({"hidden_size": -1, "rms_norm_eps": -1.0})") ==
                "toy: config.json: hidden_size is -1: sizes must be positive");
  // A value that is not a field of the config is a programming error, refused even when it is valid.
  const cfgtest::SizesConfig config;
  const std::int64_t local = 5;
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::check_positive(config, "toy", local),
                               "tracetorch::check_positive/check_not_negative: an argument is not a field that "
                               "TRACETORCH_CONFIG lists",
                               tracetorch::Error);
  // A nested struct's first field shares the struct's address: it is still not the struct's key.
  const cfgtest::LlavaConfig llava;
  DOCTEST_CHECK_THROWS_AS(tracetorch::check_positive(llava, "toy", llava.vision_config.hidden_size), tracetorch::Error);
  DOCTEST_CHECK_NOTHROW(tracetorch::check_positive(llava, "toy", llava.image_token_index));
}

namespace cfgtest {
/// GPT-2's spelling, with transformers' attribute_map: hidden_size is n_embd, and so on.
struct GptConfig {
  std::int64_t n_embd = 768;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
};
TRACETORCH_CONFIG(GptConfig, n_embd, n_layer, n_head);
TRACETORCH_CONFIG_ATTRIBUTE_MAP(GptConfig, {{"hidden_size", "n_embd"}, {"num_hidden_layers", "n_layer"}});

/// The map applies where the struct stands: nested, under its parent's key.
struct Outer {
  GptConfig text_config;
  std::int64_t image_token_index = 32000;
};
TRACETORCH_CONFIG(Outer, text_config, image_token_index);
TRACETORCH_CONFIG_ATTRIBUTE_MAP(Outer, {{"image_token_id", "image_token_index"}});

struct MapsToNoField {
  std::int64_t n_embd = 768;
};
TRACETORCH_CONFIG(MapsToNoField, n_embd);
TRACETORCH_CONFIG_ATTRIBUTE_MAP(MapsToNoField, {{"hidden_size", "n_emb"}});

struct MapsAField {
  std::int64_t n_embd = 768;
  std::int64_t hidden_size = 768;
};
TRACETORCH_CONFIG(MapsAField, n_embd, hidden_size);
TRACETORCH_CONFIG_ATTRIBUTE_MAP(MapsAField, {{"hidden_size", "n_embd"}});
}  // namespace cfgtest

DOCTEST_TEST_CASE("config: an attribute map's spellings set their fields, as transformers' attribute_map; two that differ are refused") {
  cfgtest::GptConfig config;
  auto report = tracetorch::read_config(tracetorch::ConfigFile(R"({"hidden_size": 64, "num_hidden_layers": 2, "n_head": 4})", "config.json"), config);
  DOCTEST_CHECK(config.n_embd == 64);
  DOCTEST_CHECK(config.n_layer == 2);
  DOCTEST_CHECK(config.n_head == 4);
  DOCTEST_CHECK(report.unknown_keys.empty());  // the map's keys are known keys

  // Both spellings agreeing is what a config saved from Python and edited by hand may hold.
  cfgtest::GptConfig both;
  DOCTEST_CHECK(cfgtest::read_error(R"({"hidden_size": 32, "n_embd": 32})", both).empty());
  DOCTEST_CHECK(both.n_embd == 32);
  // Disagreeing, neither is taken: the file is refused, both keys named, the config unchanged.
  cfgtest::GptConfig untouched;
  DOCTEST_CHECK(cfgtest::read_error(R"({"n_layer": 3, "n_embd": 768, "hidden_size": 64})", untouched) ==
                "tracetorch: config.json: \"hidden_size\" and \"n_embd\" name the same field, with different values (64 and 768)");
  DOCTEST_CHECK(untouched.n_layer == 12);
  // A wrong type names the key the file used.
  DOCTEST_CHECK(cfgtest::read_error(R"({"hidden_size": "big"})", untouched) ==
                "tracetorch: config.json: \"hidden_size\" must be an integer");

  // Nested: the nested struct's map, its keys full in messages and reports.
  cfgtest::Outer outer;
  report = tracetorch::read_config(
      tracetorch::ConfigFile(R"({"image_token_id": 7, "text_config": {"hidden_size": 16, "hidden_act": "gelu"}})", "config.json"), outer);
  DOCTEST_CHECK(outer.image_token_index == 7);
  DOCTEST_CHECK(outer.text_config.n_embd == 16);
  DOCTEST_CHECK(report.unknown_keys == std::vector<std::string>{"text_config.hidden_act"});
  DOCTEST_CHECK(cfgtest::read_error(R"({"text_config": {"num_hidden_layers": 1, "n_layer": 2}})", outer) ==
                "tracetorch: config.json: \"text_config.num_hidden_layers\" and \"text_config.n_layer\" name the same field, "
                "with different values (1 and 2)");

  // set_config_field (a trace program's --set) takes both spellings.
  tracetorch::set_config_field(outer, "text_config.num_hidden_layers", "5");
  tracetorch::set_config_field(outer, "image_token_id", "9");
  DOCTEST_CHECK(outer.text_config.n_layer == 5);
  DOCTEST_CHECK(outer.image_token_index == 9);

  // A map that names no field, or maps a field's own name away, is the port's mistake: refused.
  cfgtest::MapsToNoField no_field;
  DOCTEST_CHECK(cfgtest::read_error("{}", no_field) ==
                "tracetorch: config.json: TRACETORCH_CONFIG_ATTRIBUTE_MAP maps \"hidden_size\" to \"n_emb\", which is not "
                "a field TRACETORCH_CONFIG lists");
  cfgtest::MapsAField a_field;
  DOCTEST_CHECK(cfgtest::read_error("{}", a_field) ==
                "tracetorch: config.json: TRACETORCH_CONFIG_ATTRIBUTE_MAP maps \"hidden_size\" to \"n_embd\", but "
                "\"hidden_size\" is a field of its own");
}

namespace cfgtest {

// A config that extends another, as transformers' MistralConfig does LlamaConfig: the base's
// keys through the base's declaration, then its own; a member left out of the list (the rank)
// is no key; its validate hook replaces the base's.
struct MistralConfig : GptConfig {
  std::optional<std::int64_t> sliding_window = 4096;
  int rank = 0;  // not a config key
  std::int64_t head_dim = 16;

  void validate(const std::string& where) const {
    if (sliding_window && *sliding_window > 4096) throw tracetorch::Error(where + ": sliding_window too large");
  }
};
TRACETORCH_CONFIG_EXTENDS(MistralConfig, GptConfig, sliding_window, head_dim);

// With no fields of its own: the base's keys alone.
struct RankedConfig : GptConfig {
  int rank = 3;
};
TRACETORCH_CONFIG_EXTENDS(RankedConfig, GptConfig);

}  // namespace cfgtest

DOCTEST_TEST_CASE("config: TRACETORCH_CONFIG_EXTENDS reads the base's keys, its attribute map included, then the derived struct's own") {
  cfgtest::MistralConfig config;
  config.rank = 5;
  const auto report = tracetorch::read_config(
      tracetorch::ConfigFile(R"({"hidden_size": 64, "n_head": 4, "sliding_window": null, "head_dim": 8, "rank": 1, "typo": 1})", "config.json"),
      config);
  DOCTEST_CHECK(config.n_embd == 64);  // the base's attribute map applies
  DOCTEST_CHECK(config.n_head == 4);
  DOCTEST_CHECK(config.n_layer == 12);  // the base's default
  DOCTEST_CHECK(!config.sliding_window.has_value());
  DOCTEST_CHECK(config.head_dim == 8);
  DOCTEST_CHECK(config.rank == 5);  // not a key: untouched, and reported as no field's
  DOCTEST_CHECK(report.unknown_keys == std::vector<std::string>{"rank", "typo"});

  // Keys in order: the base's, then the derived struct's.
  std::vector<std::string> keys;
  for (const auto& entry : tracetorch::config_to_json(config)) keys.emplace_back(entry.key());
  DOCTEST_CHECK(keys == std::vector<std::string>{"n_embd", "n_layer", "n_head", "sliding_window", "head_dim"});

  // set_config_field (a trace program's --set) on a base key, an attribute-map spelling and an own key.
  tracetorch::set_config_field(config, "num_hidden_layers", "2");
  tracetorch::set_config_field(config, "sliding_window", "128");
  DOCTEST_CHECK(config.n_layer == 2);
  DOCTEST_CHECK(config.sliding_window == 128);
  // The derived struct's validate hook runs on read.
  cfgtest::MistralConfig refused;
  DOCTEST_CHECK(cfgtest::read_error(R"({"sliding_window": 5000})", refused) == "config.json: sliding_window too large");

  cfgtest::RankedConfig ranked;
  tracetorch::read_config(tracetorch::ConfigFile(R"({"n_layer": 1})", "config.json"), ranked);
  DOCTEST_CHECK(ranked.n_layer == 1);
  DOCTEST_CHECK(ranked.rank == 3);
  DOCTEST_CHECK(tracetorch::config_to_json(ranked).size() == 3);
}

namespace cfgtest {

// A validate hook that derives fields (Qwen3's fills layer_types) is not const: read_config,
// load_config and set_config_field's callers run it on the config they are filling.
struct LayersConfig {
  std::int64_t num_hidden_layers = 2;
  std::vector<std::string> layer_types;

  void validate(const std::string& where) {
    if (layer_types.empty()) layer_types.assign(static_cast<std::size_t>(num_hidden_layers), "full_attention");
    if (static_cast<std::int64_t>(layer_types.size()) != num_hidden_layers) throw tracetorch::Error(where + ": layer_types must have one entry per layer");
  }
};
TRACETORCH_CONFIG(LayersConfig, num_hidden_layers, layer_types);

}  // namespace cfgtest

DOCTEST_TEST_CASE("config: a validate hook that is not const derives fields on every read and in validate_config") {
  cfgtest::LayersConfig config;
  tracetorch::read_config(tracetorch::ConfigFile(R"({"num_hidden_layers": 3})", "config.json"), config);
  DOCTEST_CHECK(config.layer_types == std::vector<std::string>{"full_attention", "full_attention", "full_attention"});
  // Refused as a const hook would be, the config unchanged.
  DOCTEST_CHECK(cfgtest::read_error(R"({"num_hidden_layers": 1, "layer_types": ["a", "b"]})", config) ==
                "config.json: layer_types must have one entry per layer");
  DOCTEST_CHECK(config.layer_types.size() == 3);
  // After set_config_field, validate_config runs it again (what a trace program's --set does).
  tracetorch::set_config_field(config, "layer_types", "[]");
  tracetorch::set_config_field(config, "num_hidden_layers", "1");
  tracetorch::validate_config(config, "with --set");
  DOCTEST_CHECK(config.layer_types == std::vector<std::string>{"full_attention"});
}
