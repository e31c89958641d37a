// examples/llava (transformers' 5.x LlavaForConditionalGeneration on the shared CLIP and Llama
// parts) traced against the Python reference's bundle tests/data/llava (make_llava_fixture.py):
// in process and through llava_trace, the default call and use_cache=False with the output flags.

#include <doctest/doctest.h>

#include <llava/llava.hpp>

#include "test_helpers.hpp"

#include <tracetorch/tracetorch.hpp>

namespace llava_trace_test {

std::filesystem::path llava_dir() { return tracetorch_test::data_dir() / "llava"; }

llava::LlavaForConditionalGeneration fixture_model() {
  llava::LlavaForConditionalGeneration model(llava::LlavaConfig::from_json_file(llava_dir() / "config.json"));
  llava::load_state_dict(*model, llava_dir() / "model.safetensors");
  model->eval();
  return model;
}

torch::Tensor fixture_input(const std::string& name) {
  return tracetorch::safetensors::load_single(llava_dir() / "inputs.safetensors", name);
}

// A folder whose trace_repr / trace_st are the bundle's `<prefix>_repr` / `<prefix>_st`, the layout
// expect_trace_matches_reference reads.
std::filesystem::path reference_for(const tracetorch_test::TempDir& dir, const std::string& prefix) {
  const auto root = dir / ("reference_" + prefix);
  std::filesystem::create_directories(root);
  for (const std::string kind : {"repr", "st"}) {
    std::filesystem::create_directory_symlink(llava_dir() / (prefix + "_" + kind), root / ("trace_" + kind));
  }
  return root;
}

// Every file of both kinds byte for byte, and the checks of expect_trace_matches_reference
// (tracetorch-diff exit 0 with no rules, the JSON as upstream's, each tensor file).
void expect_bundle_trace(const std::filesystem::path& ours, const tracetorch_test::TempDir& scratch, const std::string& prefix) {
  const auto reference = reference_for(scratch, prefix);
  const auto compared = tracetorch_test::expect_trace_matches_reference(ours, reference, "LlavaForConditionalGeneration");
  DOCTEST_CHECK(compared == tracetorch_test::count_files(llava_dir() / (prefix + "_st")) - 2);
  for (const std::string kind : {"repr", "st"}) {
    const auto expected = llava_dir() / (prefix + "_" + kind);
    DOCTEST_CHECK(tracetorch_test::file_names(ours / kind) == tracetorch_test::file_names(expected));
    for (const auto& name : tracetorch_test::file_names(expected)) {
      DOCTEST_INFO(prefix, " ", kind, " ", name);
      DOCTEST_CHECK(tracetorch_test::read_file(ours / kind / name) == tracetorch_test::read_file(expected / name));
    }
  }
}

tracetorch_test::RunResult run_llava_trace(const std::string& arguments) {
  const auto file = [](const char* name) { return (llava_dir() / name).string(); };
  return tracetorch_test::run_program(TRACETORCH_LLAVA_TRACE, "--config " + file("config.json") + " --weights " +
                                                                  file("model.safetensors") + " --inputs " +
                                                                  file("inputs.safetensors") + " " + arguments);
}

}  // namespace llava_trace_test

DOCTEST_TEST_SUITE("llava") {

DOCTEST_TEST_CASE("llava: the default call traces as the reference's (tests/data/llava), both kinds, byte for byte") {
  using llava_trace_test::fixture_input;
  auto model = llava_trace_test::fixture_model();
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / "ours" / kind, .do_prune_layers = false,
                                                             .use_repr = kind == "repr"});
    DOCTEST_CHECK(guard.untraced_modules().empty());
    // Python: model(input_ids=ids, pixel_values=pixels, attention_mask=mask)
    const auto out = model({.input_ids = fixture_input("input_ids"), .pixel_values = fixture_input("pixel_values"),
                            .attention_mask = fixture_input("attention_mask")});
    DOCTEST_CHECK(guard.modules_not_called().empty());
    DOCTEST_CHECK(out.past_key_values != nullptr);  // use_cache from text_config
    DOCTEST_CHECK(!out.hidden_states.has_value());
  }
  llava_trace_test::expect_bundle_trace(dir / "ours", dir, "trace");
}

DOCTEST_TEST_CASE("llava: use_cache=False with the output flags traces as the reference's, both kinds, byte for byte") {
  using llava_trace_test::fixture_input;
  auto model = llava_trace_test::fixture_model();
  tracetorch_test::TempDir dir;
  for (const std::string kind : {"repr", "st"}) {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir / "ours" / kind, .do_prune_layers = false,
                                                             .use_repr = kind == "repr"});
    // Python: model(..., use_cache=False, output_hidden_states=True, output_attentions=True), in that order
    const auto out = model({.input_ids = fixture_input("input_ids"), .pixel_values = fixture_input("pixel_values"),
                            .attention_mask = fixture_input("attention_mask")},
                           tracetorch::output_options({{"use_cache", false}, {"output_hidden_states", true}, {"output_attentions", true}}));
    DOCTEST_CHECK(out.past_key_values == nullptr);
  }
  llava_trace_test::expect_bundle_trace(dir / "ours", dir, "trace_nocache");
}

DOCTEST_TEST_CASE("llava_trace: --inputs and --call give the reference's traces for both calls and kinds") {
  tracetorch_test::TempDir dir;
  const std::string nocache = " --call use_cache=False --call output_hidden_states=True --call output_attentions=True";
  for (const auto& [prefix, call] : {std::pair{std::string("trace"), std::string()}, std::pair{std::string("trace_nocache"), nocache}}) {
    for (const std::string kind : {"repr", "st"}) {
      const auto result = llava_trace_test::run_llava_trace("--no-prune-layers" + call + (kind == "st" ? " --safetensors" : "") +
                                                            " --debug-path " + (dir / prefix / kind).string());
      DOCTEST_INFO(result.output);
      DOCTEST_REQUIRE(result.exit_code == 0);
      DOCTEST_CHECK(result.output.find("llava_trace: traced LlavaForConditionalGeneration") != std::string::npos);
    }
    llava_trace_test::expect_bundle_trace(dir / prefix, dir, prefix);
  }
  // A tensor of --inputs that is no keyword of the root call is refused before any work.
  const auto bad = tracetorch_test::run_program(
      TRACETORCH_LLAVA_TRACE, "--inputs " + (llava_trace_test::llava_dir() / "captured_vision.safetensors").string() + " --debug-path " +
                                   (dir / "refused").string());
  DOCTEST_CHECK(bad.exit_code == 2);
  DOCTEST_CHECK(!std::filesystem::exists(dir / "refused"));
  DOCTEST_CHECK(bad.output.find("tensor 'last_hidden_state' is not a keyword of the call") != std::string::npos);
}

DOCTEST_TEST_CASE("llava_trace: --dump-captured writes logits, hidden_states, attentions and image_hidden_states, bit for bit") {
  tracetorch_test::TempDir dir;
  const auto result = llava_trace_test::run_llava_trace("--call use_cache=False --output-hidden-states --output-attentions --dump-captured " +
                                                        (dir / "captured").string() + " --debug-path " + (dir / "trace").string());
  DOCTEST_INFO(result.output);
  DOCTEST_REQUIRE(result.exit_code == 0);
  const tracetorch::safetensors::Reader expected(llava_trace_test::llava_dir() / "captured.safetensors");
  std::size_t compared = 0;
  for (const auto& info : expected.header().tensors) {  // the bundle's names: logits, hidden_states_<i>, ..., image_hidden_states
    const auto& name = info.name;
    DOCTEST_INFO(name);
    const auto mine = tracetorch::safetensors::load_single(dir / "captured" / (name + ".safetensors"), "data");
    DOCTEST_CHECK(torch::equal(mine, expected.load(name)));
    ++compared;
  }
  DOCTEST_CHECK(compared == 7);
  DOCTEST_CHECK(!std::filesystem::exists(dir / "captured" / "hidden_states_3.safetensors"));
}

}  // DOCTEST_TEST_SUITE("llava")
