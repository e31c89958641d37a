// Reliability of the model addition debugger (issue 8): a scope on a submodule inside a scope on
// the model, ended in either order, and a forward that throws under both. docs/reliability.md
// lists each case.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include "reliability_helpers.hpp"

#include <filesystem>
#include <optional>
#include <stdexcept>

namespace reliability_test {

DOCTEST_TEST_SUITE("reliability") {

// ---------------------------------------------------------------------------------------------
// Nested scopes

DOCTEST_TEST_CASE("a scope on a submodule inside a scope on the model: each writes its own whole trace") {
  auto model = make_outer();
  const auto outer_reference = trace_files(model, outer_input(), true);
  // The block's own trace, alone: the model passes its input to the block unchanged.
  const auto block_alone = trace_files(model->block, outer_input(), false);

  TempDir outer_dir, block_dir;
  std::optional<tracetorch::DebuggerScope> outer_scope(
      tracetorch::model_addition_debugger(model, {.debug_path = outer_dir.path(), .do_prune_layers = false}));
  std::optional<tracetorch::DebuggerScope> block_scope(tracetorch::model_addition_debugger(
      model->block, {.debug_path = block_dir.path(), .do_prune_layers = false, .use_repr = false}));
  model(outer_input());
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_reference);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_alone);
  const auto block_trace = read_json(block_dir / "Block_debug_tree_SUMMARY.json");
  DOCTEST_CHECK(module_paths(block_trace) ==
                std::vector<std::string>{"Block", "Block.a", "Block.a.lin", "Block.b", "Block.b.lin"});
  DOCTEST_CHECK(torch::GradMode::is_enabled());

  // Ended out of order: the outer scope first. The inner one still records alone.
  outer_scope.reset();
  std::filesystem::remove_all(outer_dir.path());
  std::filesystem::create_directories(outer_dir.path());
  std::filesystem::remove_all(block_dir.path());
  std::filesystem::create_directories(block_dir.path());
  model(outer_input());
  DOCTEST_CHECK(tracetorch_test::count_files(outer_dir.path()) == 0);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_alone);
  block_scope.reset();
  DOCTEST_CHECK(attached_modules(*model) == 0);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
}

DOCTEST_TEST_CASE("a forward that throws under two nested scopes leaves both traces and the model intact") {
  auto model = make_outer();
  TempDir outer_dir, block_dir;
  auto outer_scope = tracetorch::model_addition_debugger(model, {.debug_path = outer_dir.path(), .use_repr = false});
  auto block_scope = tracetorch::model_addition_debugger(model->block, {.debug_path = block_dir.path(), .use_repr = false});
  model(outer_input());
  const auto outer_before = snapshot(outer_dir.path());
  const auto block_before = snapshot(block_dir.path());
  model->block->b->fail = true;
  DOCTEST_CHECK_THROWS_AS(model(outer_input(2.0)), std::runtime_error);
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_before);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_before);
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  model->block->b->fail = false;
  model(outer_input());
  DOCTEST_CHECK(snapshot(outer_dir.path()) == outer_before);
  DOCTEST_CHECK(snapshot(block_dir.path()) == block_before);
}

}  // DOCTEST_TEST_SUITE

}  // namespace reliability_test
