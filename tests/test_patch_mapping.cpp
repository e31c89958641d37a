// tracetorch/patch_mapping.hpp: the patch registry and patch_output_recorders.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "capture_toys.hpp"

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("patch mapping: exact names first, then patterns in registration order") {
  PatchKeys cleanup{{"^Llama\\d+Attention$", ".*Attention$", "FooAttention", "Other"}};
  tracetorch::register_patch_mapping({{"^Llama\\d+Attention$", tracetorch::replacement<FusedToyAttn>()},
                                      {".*Attention$", tracetorch::replacement<StaticToyAttn>()}});
  tracetorch::register_patch_mapping({{"FooAttention", tracetorch::replacement<ToyLayer>()}});
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama2Attention")->name == "FusedToyAttn");
  DOCTEST_CHECK(tracetorch::find_patch_replacement("MistralAttention")->name == "StaticToyAttn");
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention")->name == "ToyLayer");  // exact beats pattern
  DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("Llama2Mlp").has_value());
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama2AttentionX").has_value() == false);

  // Twice without overwrite: an error, and nothing of that call is registered.
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"Other", tracetorch::replacement<ToyLayer>()},
                                                                   {"FooAttention", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("already registered"), tracetorch::Error);
  DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("Other").has_value());
  // With overwrite the key keeps its place and takes the new value.
  tracetorch::register_patch_mapping({{"^Llama\\d+Attention$", tracetorch::replacement<ToyLayer>()}}, /*overwrite=*/true);
  DOCTEST_CHECK(tracetorch::find_patch_replacement("Llama3Attention")->name == "ToyLayer");

  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"(unclosed", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("not a valid pattern"), tracetorch::Error);
  // Keys in Python's syntax, as upstream writes them: inline flags, named groups. Lookaround,
  // which RE2 does not have, is refused at registration.
  {
    PatchKeys python_keys{{"(?i)^toy", "(?P<family>Mistral)Mlp$"}};
    tracetorch::register_patch_mapping({{"(?i)^toy", tracetorch::replacement<FusedToyAttn>()},
                                        {"(?P<family>Mistral)Mlp$", tracetorch::replacement<ToyLayer>()}});
    DOCTEST_CHECK(tracetorch::find_patch_replacement("TOYBlock")->name == "FusedToyAttn");
    DOCTEST_CHECK(tracetorch::find_patch_replacement("MistralMlp")->name == "ToyLayer");
    DOCTEST_CHECK_FALSE(tracetorch::find_patch_replacement("MistralMlpX").has_value());
  }
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::register_patch_mapping({{"Llama(?=Attention)", tracetorch::replacement<ToyAttn>()}}),
                               doctest::Contains("not a valid pattern"), tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::unregister_patch_mapping({"FooAttention", "NeverRegistered"}),
                               doctest::Contains("NeverRegistered"), tracetorch::Error);
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention").has_value());  // nothing removed
  tracetorch::unregister_patch_mapping({"FooAttention"});
  DOCTEST_CHECK(tracetorch::find_patch_replacement("FooAttention")->name == "StaticToyAttn");  // now the pattern
}

DOCTEST_TEST_CASE("patch_output_recorders: the replacement alone is recorded, and only once it was called") {
  const auto x = torch::randn({1, 4});
  const tracetorch::OutputOptions attentions{.output_attentions = true};
  OtherToyModel other(2, 4);  // its attention modules are OtherAttn, not ToyAttn
  ToyModel original(2, 4);
  DOCTEST_CHECK(other(x, attentions).attentions->empty());
  PatchKeys cleanup{{"ToyAttn"}};
  tracetorch::register_patch_mapping({{"ToyAttn", tracetorch::replacement<OtherAttn>()}});
  DOCTEST_CHECK(other(x, attentions).attentions->empty());  // registered, not yet patched: as upstream
  const auto report = tracetorch::patch_output_recorders(other);
  DOCTEST_REQUIRE(report.size() == 2);
  DOCTEST_CHECK(report[1].field == "attentions");
  DOCTEST_CHECK(report[1].target == "ToyAttn");
  DOCTEST_CHECK(report[1].replacement == "OtherAttn");
  DOCTEST_CHECK(report[0].replacement.empty());
  const auto patched = other(x, attentions);
  DOCTEST_REQUIRE(patched.attentions->size() == 2);
  DOCTEST_CHECK(torch::equal((*patched.attentions)[0], torch::softmax(x, -1)));
  // Patching is per model class: ToyModel still records ToyAttn until it is patched, then only
  // the replacement, which it does not contain.
  DOCTEST_CHECK(original(x, attentions).attentions->size() == 2);
  tracetorch::patch_output_recorders(original);
  DOCTEST_CHECK(original(x, attentions).attentions->empty());
  tracetorch::unpatch_output_recorders();
  DOCTEST_CHECK(original(x, attentions).attentions->size() == 2);
  DOCTEST_CHECK(other(x, attentions).attentions->empty());
}

}  // DOCTEST_TEST_SUITE
