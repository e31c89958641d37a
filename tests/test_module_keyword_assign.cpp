// detail/module/keyword_assign.hpp and python_value.hpp: a keyword struct's field set by name
// from a Python literal or a tensor; unknown names and wrong types refused with the names listed.

#include <doctest/doctest.h>

#include <tracetorch/keywords.hpp>
#include <tracetorch/capture.hpp>
#include <tracetorch/output.hpp>

#include "tracetorch/detail/module/keyword_assign.hpp"

#include <string>
#include <tuple>
#include <vector>

namespace program_keyword_assign_test {

struct CallKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(true);
  tracetorch::Keyword<std::int64_t> top_k;
  tracetorch::Keyword<double> temperature;
  tracetorch::Keyword<std::string> mode;
  tracetorch::Keyword<std::tuple<torch::Tensor, torch::Tensor>> position_embeddings;
  tracetorch::Keyword<std::vector<std::int64_t>> layers;
};
TRACETORCH_KEYWORDS(CallKeywords, attention_mask, use_cache, top_k, temperature, mode, position_embeddings, layers);

using tracetorch::detail::PythonValue;

void set(CallKeywords& kw, std::string_view name, std::string_view literal) {
  tracetorch::detail::RebuildContext context;
  tracetorch::detail::assign_keyword(kw, name, tracetorch::detail::parse_python_literal(literal, name), context);
}

std::string refusal(CallKeywords& kw, std::string_view name, std::string_view literal) {
  try {
    set(kw, name, literal);
  } catch (const tracetorch::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace program_keyword_assign_test

DOCTEST_TEST_SUITE("program keyword assign") {

DOCTEST_TEST_CASE("Python literals parse as ast.literal_eval reads them") {
  using tracetorch::detail::parse_python_literal;
  using Kind = tracetorch::detail::PythonValue::Kind;
  DOCTEST_CHECK(parse_python_literal("None", "x").kind == Kind::none);
  DOCTEST_CHECK(parse_python_literal(" True ", "x").boolean);
  DOCTEST_CHECK(parse_python_literal("-12", "x").integer == -12);
  DOCTEST_CHECK(parse_python_literal("1_000", "x").integer == 1000);
  DOCTEST_CHECK(parse_python_literal("1e-06", "x").floating == 1e-6);
  DOCTEST_CHECK(parse_python_literal("'a\\'b'", "x").text == "a'b");
  const auto tuple = parse_python_literal("(1, (2.5, 'x'), [None])", "x");
  DOCTEST_REQUIRE(tuple.items.size() == 3);
  DOCTEST_CHECK(tuple.items[1].second.items[0].second.floating == 2.5);
  DOCTEST_CHECK(tuple.items[2].second.items[0].second.kind == Kind::none);
  DOCTEST_CHECK(parse_python_literal("(3)", "x").kind == Kind::integer);
  DOCTEST_CHECK(parse_python_literal("(3,)", "x").kind == Kind::sequence);
  DOCTEST_CHECK_THROWS_WITH_AS(parse_python_literal("Flase", "use_cache"), doctest::Contains("'Flase' is not a Python literal"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(parse_python_literal("(1, 2", "x"), tracetorch::Error);
  DOCTEST_CHECK(tracetorch::detail::python_value_from_repr("DynamicCache(layers=[DynamicLayer])").kind == Kind::object);
}

DOCTEST_TEST_CASE("fields set by name are passed, and traced as keywords") {
  using namespace program_keyword_assign_test;
  CallKeywords kw;
  DOCTEST_CHECK_FALSE(kw.use_cache.passed());
  set(kw, "use_cache", "False");
  DOCTEST_CHECK(kw.use_cache.passed());
  DOCTEST_CHECK_FALSE(*kw.use_cache);
  set(kw, "top_k", "5");
  DOCTEST_CHECK(*kw.top_k == 5);
  set(kw, "temperature", "2");  // an int where a float is taken, as Python allows
  DOCTEST_CHECK(*kw.temperature == 2.0);
  set(kw, "mode", "\"greedy\"");
  DOCTEST_CHECK(*kw.mode == "greedy");
  set(kw, "layers", "[1, 3]");
  DOCTEST_CHECK(*kw.layers == std::vector<std::int64_t>{1, 3});
  set(kw, "attention_mask", "None");
  DOCTEST_CHECK(kw.attention_mask.is_none());

  tracetorch::detail::RebuildContext context;
  PythonValue pair;
  pair.kind = PythonValue::Kind::sequence;
  pair.items = {{"0", PythonValue::of_tensor(torch::ones({2}))}, {"1", PythonValue::of_tensor(torch::zeros({2}))}};
  tracetorch::detail::assign_keyword(kw, "position_embeddings", pair, context);
  DOCTEST_CHECK(std::get<0>(*kw.position_embeddings).sum().item<float>() == 2.0f);

  std::vector<std::string> traced;
  tracetorch_keywords(static_cast<const CallKeywords&>(kw), [&](std::string_view name, const auto&) { traced.emplace_back(name); });
  DOCTEST_CHECK(traced == std::vector<std::string>{"attention_mask", "use_cache", "top_k", "temperature", "mode",
                                                   "position_embeddings", "layers"});
}

DOCTEST_TEST_CASE("an unknown name or a wrong type is refused, naming the keywords the struct takes") {
  using namespace program_keyword_assign_test;
  CallKeywords kw;
  const std::string names = "attention_mask, use_cache, top_k, temperature, mode, position_embeddings, layers";
  const auto unknown = refusal(kw, "use_cahce", "False");
  DOCTEST_CHECK(unknown == "no keyword 'use_cahce': the keywords are " + names);
  const auto wrong = refusal(kw, "use_cache", "1");
  DOCTEST_CHECK(wrong == "use_cache takes True or False, not 1 (the keywords: " + names + ")");
  DOCTEST_CHECK(refusal(kw, "top_k", "2.5").find("top_k takes an integer, not 2.5") == 0);
  DOCTEST_CHECK(refusal(kw, "position_embeddings", "(1, 2, 3)").find("takes a tuple of 2") != std::string::npos);
  DOCTEST_CHECK(refusal(kw, "attention_mask", "3").find("attention_mask takes a tensor or None, not 3") == 0);
  DOCTEST_CHECK_FALSE(kw.use_cache.passed());  // nothing set by a refused value
}

DOCTEST_TEST_CASE("OutputOptions' keywords by name") {
  tracetorch::OutputOptions options;
  tracetorch::detail::RebuildContext context;
  using tracetorch::detail::parse_python_literal;
  tracetorch::detail::assign_keyword(options, "output_hidden_states", parse_python_literal("True", "x"), context);
  tracetorch::detail::assign_keyword(options, "use_cache", parse_python_literal("False", "x"), context);
  DOCTEST_CHECK(options.output_hidden_states->all());
  DOCTEST_CHECK(options.use_cache == false);
  // output_<key>: the record keys some capturing model of this program declares (the toys' and,
  // where the ports are built, Qwen2-MoE's router_logits), listed in declaration order.
  const auto flags = tracetorch::record_key_flags(options);
  std::string listed = "the keywords are output_hidden_states, output_attentions, ";
  for (const auto& flag : flags) listed += flag + ", ";
  DOCTEST_CHECK_THROWS_WITH_AS(
      tracetorch::detail::assign_keyword(options, "output_router_logit", parse_python_literal("True", "x"), context),
      doctest::Contains((listed + "use_cache").c_str()), tracetorch::Error);
  DOCTEST_CHECK(options.output.empty());
  for (const auto& flag : flags) {
    tracetorch::detail::assign_keyword(options, flag, parse_python_literal("True", "x"), context);
    DOCTEST_CHECK(("output_" + std::string(options.output.back().key.name())) == flag);
    DOCTEST_CHECK(options.output.back().value);
  }
  DOCTEST_CHECK(options.output.size() == flags.size());
}

}  // DOCTEST_TEST_SUITE
