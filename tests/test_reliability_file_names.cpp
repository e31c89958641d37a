// Reliability of the model addition debugger (issue 8): module names that are not safe as file
// names ('/', '%', control characters, a path too long) and the files they are written to.
// docs/reliability.md lists each case.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "reliability_helpers.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace reliability_test {

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// Paths

DOCTEST_TEST_CASE("file names: '/', '%' and control characters are escaped as %XX, nothing else") {
  using tracetorch::detail::file_name_for;
  DOCTEST_CHECK(file_name_for("LlamaModel.layers.0.mlp_inputs_args_0") == "LlamaModel.layers.0.mlp_inputs_args_0");
  DOCTEST_CHECK(file_name_for("M.a/b_outputs") == "M.a%2Fb_outputs");
  DOCTEST_CHECK(file_name_for("M.a%2Fb_outputs") == "M.a%252Fb_outputs");
  DOCTEST_CHECK(file_name_for("M_outputs_../../x") == "M_outputs_..%2F..%2Fx");
  DOCTEST_CHECK(file_name_for(std::string("a\nb\tc\x7f\x01", 7) + std::string(1, '\0')) == "a%0Ab%09c%7F%01%00");
  DOCTEST_CHECK(file_name_for("sp ace \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de:*?<>|\\\"'") == "sp ace \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de:*?<>|\\\"'");
}

DOCTEST_TEST_CASE("module names unsafe as file names: every file lands in debug_path, named as documented") {
  // LibTorch forbids only empty names and names with a dot.
  {
    torch::nn::Module probe;
    DOCTEST_CHECK_THROWS_AS(probe.register_module("a.b", tracetorch::nn::Linear(1, 1)), c10::Error);
    DOCTEST_CHECK_THROWS_AS(probe.register_module("", tracetorch::nn::Linear(1, 1)), c10::Error);
  }
  static const std::vector<std::string> odd_names = {"a/b", "a%2Fb", "/", "sp ace", "new\nline", "\xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de", "%"};
  struct OddNamesImpl : torch::nn::Module {
    OddNamesImpl() {
      for (const auto& name : odd_names) layers.push_back(register_module(name, tracetorch::nn::Linear(2, 2)));
    }
    std::map<std::string, torch::Tensor> forward(torch::Tensor x) {
      for (auto& layer : layers) x = layer(x);
      return {{"../../outside", x}, {"/absolute", x + 1}};
    }
    std::vector<tracetorch::nn::Linear> layers;
  };
  TRACETORCH_TRACEABLE_IMPL(OddNames, OddNamesImpl);
  OddNames model;
  TempDir parent;
  const auto dir = parent / "debug";
  std::filesystem::create_directories(dir);
  // A decoy: with the names unescaped, "OddNames_outputs_../../outside" would resolve to
  // parent/outside.safetensors through this directory.
  std::filesystem::create_directories(dir / "OddNames_outputs_..");
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir, .use_repr = false});
    model(torch::ones({1, 2}));
  }
  DOCTEST_CHECK(names_of(snapshot(parent.path())) == std::set<std::string>{"debug"});
  const auto files = snapshot(dir);
  for (const auto& [name, content] : files) {
    DOCTEST_INFO(name);
    DOCTEST_CHECK((name == "OddNames_outputs_.." || std::filesystem::is_regular_file(dir / name)));
  }
  DOCTEST_CHECK(snapshot(dir / "OddNames_outputs_..").empty());
  const auto full = read_json(dir / "OddNames_debug_tree_FULL_TENSORS.json");
  std::vector<std::string> referenced;
  file_references(full, referenced);
  DOCTEST_CHECK(referenced.size() == 1 + 2 * odd_names.size());  // the root's input, each layer's input and output
  for (const auto& name : referenced) {
    DOCTEST_INFO(name);
    DOCTEST_CHECK(files.contains(name));
  }
  // + the root's two outputs (written, not referenced, as in Python), the two JSON files, the decoy
  DOCTEST_CHECK(files.size() == referenced.size() + 2 + 2 + 1);
  for (const char* expected :
       {"OddNames.a%2Fb_inputs_args_0.safetensors", "OddNames.a%252Fb_inputs_args_0.safetensors",
        "OddNames.%2F_outputs.safetensors", "OddNames.sp ace_outputs.safetensors", "OddNames.new%0Aline_outputs.safetensors",
        "OddNames.\xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "de_outputs.safetensors", "OddNames.%25_outputs.safetensors",
        "OddNames_outputs_..%2F..%2Foutside.safetensors", "OddNames_outputs_%2Fabsolute.safetensors"}) {
    DOCTEST_INFO(expected);
    DOCTEST_CHECK(files.contains(expected));
  }
  // The JSON keeps the module paths as they are.
  auto paths = module_paths(full);
  DOCTEST_CHECK(std::find(paths.begin(), paths.end(), "OddNames.a/b") != paths.end());
  DOCTEST_CHECK(std::find(paths.begin(), paths.end(), "OddNames.new\nline") != paths.end());
}

DOCTEST_TEST_CASE("a module path too long for a file name: a clear error, no file left") {
  struct LongNameImpl : torch::nn::Module {
    LongNameImpl() { inner = register_module(std::string(300, 'x'), tracetorch::nn::Linear(2, 2)); }
    torch::Tensor forward(torch::Tensor x) { return inner(x); }
    tracetorch::nn::Linear inner{nullptr};
  };
  TRACETORCH_TRACEABLE_IMPL(LongName, LongNameImpl);
  LongName model;
  TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .use_repr = false});
    const auto final_name = (dir / ("LongName." + std::string(300, 'x') + "_inputs_args_0.safetensors")).string();
    DOCTEST_CHECK_THROWS_WITH_AS(model(torch::ones({1, 2})), ("tracetorch: cannot create " + final_name + ": File name too long").c_str(),
                                 tracetorch::Error);
    DOCTEST_CHECK(tracetorch_test::count_files(dir.path()) == 0);
  }
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  // With use_repr there is no file per tensor, and the trace works.
  TempDir repr_dir;
  auto repr_guard = tracetorch::model_addition_debugger(model, {.debug_path = repr_dir.path()});
  model(torch::ones({1, 2}));
  DOCTEST_CHECK(tracetorch_test::count_files(repr_dir.path()) == 2);
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
