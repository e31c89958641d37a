// TRACETORCH_KEYWORDS(Type) and TRACETORCH_CONFIG(Type) without field names, where Boost.PFR
// names fields (Boost >= 1.84): each struct is visited exactly as its twin with the names listed.
// Built only where that Boost.PFR is found (tests/CMakeLists.txt: Boost >= 1.84, or
// -DTRACETORCH_PFR_INCLUDE_DIR=<a newer Boost.PFR's include directory>).

#include <doctest/doctest.h>

#include <tracetorch/config_file.hpp>
#include <tracetorch/keywords.hpp>

#include <boost/json/serialize.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

static_assert(TRACETORCH_FIELD_NAMES_FROM_PFR, "this test needs Boost.PFR's field names");

namespace pfr_names {

struct NamedKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<const int*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<std::int64_t> layer_index;
};
TRACETORCH_KEYWORDS(NamedKeywords);

struct ListedKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<const int*> past_key_values;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<std::int64_t> layer_index;
};
TRACETORCH_KEYWORDS(ListedKeywords, attention_mask, past_key_values, use_cache, layer_index);

struct VisionConfig {
  std::int64_t hidden_size = 768;
  std::string hidden_act = "quick_gelu";
};
TRACETORCH_CONFIG(VisionConfig);

struct NamedConfig {
  std::int64_t vocab_size = 32000;
  double rms_norm_eps = 1e-6;
  std::optional<std::int64_t> head_dim;
  std::vector<std::string> layer_types;
  VisionConfig vision_config;
};
TRACETORCH_CONFIG(NamedConfig);

struct ListedConfig {
  std::int64_t vocab_size = 32000;
  double rms_norm_eps = 1e-6;
  std::optional<std::int64_t> head_dim;
  std::vector<std::string> layer_types;
  VisionConfig vision_config;
};
TRACETORCH_CONFIG(ListedConfig, vocab_size, rms_norm_eps, head_dim, layer_types, vision_config);

/// "name=value" for each keyword a const visit records.
template <class Keywords>
std::vector<std::string> recorded(const Keywords& kw) {
  std::vector<std::string> out;
  tracetorch_keywords(kw, [&](std::string_view name, const auto& value) {
    using V = std::remove_cvref_t<decltype(value)>;
    std::string shown = "?";
    if constexpr (std::is_same_v<V, std::nullptr_t>) shown = "None";
    else if constexpr (std::is_same_v<V, bool>) shown = value ? "True" : "False";
    else if constexpr (std::is_same_v<V, std::int64_t>) shown = std::to_string(value);
    else if constexpr (std::is_same_v<V, torch::Tensor>) shown = "tensor" + std::to_string(value.numel());
    out.push_back(std::string(name) + "=" + shown);
  });
  return out;
}

template <class Keywords>
std::vector<std::string> every_name(Keywords& kw) {
  std::vector<std::string> out;
  tracetorch_keywords(kw, [&](std::string_view name, auto&) { out.emplace_back(name); });
  return out;
}

}  // namespace pfr_names

DOCTEST_TEST_CASE("keywords named by Boost.PFR record what the listed twin records, in order") {
  using namespace pfr_names;
  const auto mask = torch::ones({2, 3});
  const NamedKeywords named{.attention_mask = mask, .past_key_values = nullptr, .layer_index = 4};
  const ListedKeywords listed{.attention_mask = mask, .past_key_values = nullptr, .layer_index = 4};
  DOCTEST_CHECK_EQ(recorded(named), std::vector<std::string>{"attention_mask=tensor6", "past_key_values=None", "layer_index=4"});
  DOCTEST_CHECK_EQ(recorded(named), recorded(listed));
  NamedKeywords all;
  DOCTEST_CHECK_EQ(every_name(all), std::vector<std::string>{"attention_mask", "past_key_values", "use_cache", "layer_index"});
  tracetorch_keywords(all, [](std::string_view name, auto& field) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(field)>, tracetorch::Keyword<bool>>) {
      if (name == "use_cache") field = true;
    }
  });
  DOCTEST_CHECK_EQ(recorded(all), std::vector<std::string>{"use_cache=True"});
}

DOCTEST_TEST_CASE("a config named by Boost.PFR reads, reports, sets and writes as the listed twin does") {
  using namespace pfr_names;
  const tracetorch::ConfigFile file(
      R"({"vocab_size": 1000, "head_dim": 16, "layer_types": ["full", "sliding"], "sliding_window": 4,
          "vision_config": {"hidden_size": 64, "projection_dim": 8}})",
      "config.json");
  NamedConfig named;
  ListedConfig listed;
  const auto named_report = tracetorch::read_config(file, named);
  const auto listed_report = tracetorch::read_config(file, listed);
  DOCTEST_CHECK_EQ(named.vocab_size, 1000);
  DOCTEST_CHECK_EQ(named.head_dim, std::optional<std::int64_t>(16));
  DOCTEST_CHECK_EQ(named.vision_config.hidden_size, 64);
  DOCTEST_CHECK_EQ(named_report.unknown_keys, std::vector<std::string>{"sliding_window", "vision_config.projection_dim"});
  DOCTEST_CHECK_EQ(named_report.unknown_keys, listed_report.unknown_keys);
  tracetorch::set_config_field(named, "vision_config.hidden_act", "'gelu'");
  tracetorch::set_config_field(listed, "vision_config.hidden_act", "'gelu'");
  DOCTEST_CHECK_EQ(boost::json::serialize(tracetorch::config_to_json(named)),
                   boost::json::serialize(tracetorch::config_to_json(listed)));
  DOCTEST_CHECK_NE(boost::json::serialize(tracetorch::config_to_json(named)).find(R"("hidden_act":"gelu")"), std::string::npos);
}
