#pragma once
/// \file
/// The common tests of tracetorch's own machinery on a model: capturing leaves outputs as they
/// were, the debugger's trace reaches every submodule, and the debugger restores what it changed.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <boost/json.hpp>

#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/debugger.hpp"
#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/fs/read_file.hpp"
#include "tracetorch/testing/checks.hpp"
#include "tracetorch/testing/fixture.hpp"
#include "tracetorch/testing/tester.hpp"
#include "tracetorch/module.hpp"

namespace tracetorch::testing::detail {

inline void collect_module_paths(const boost::json::value& node, std::set<std::string>& paths) {
  const auto& object = node.as_object();
  paths.insert(std::string(object.at("module_path").as_string()));
  if (const auto* children = object.if_contains("children")) {
    for (const auto& child : children->as_array()) collect_module_paths(child, paths);
  }
}

/// A trace JSON file, through the shared check (detail/fs/read_file.hpp) like every reader.
inline std::string read_text(const std::filesystem::path& path) {
  return tracetorch::detail::read_regular_file(path, tracetorch::detail::kMaxTraceJsonBytes, "a trace JSON file");
}

/// Asking for hidden_states and attentions does not change last_hidden_state, and a plain
/// call afterwards returns no captured outputs (nothing stays attached).
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_capture_leaves_outputs_unchanged) {
  const auto plain = s.forward();
  const auto captured = s.forward(all_outputs<Tester>());
  check_close("last_hidden_state with capture", captured.last_hidden_state, plain.last_hidden_state, 0, 0);
  const auto again = s.forward();
  check_outputs_close("a plain call after a capture", again, plain, 0);
}

/// Under the debugger, every registered submodule (containers aside) is TRACEABLE and is
/// called: its path appears in the trace.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_trace_covers_every_submodule) {
  require_traceable_model<Tester>();
  ScratchDir dir;
  std::filesystem::path trace;
  {
    auto guard = model_addition_debugger(s.model, {.debug_path = dir.path(), .do_prune_layers = false});
    for (const auto& path : guard.untraced_modules()) {
      DOCTEST_CHECK_MESSAGE(false, path << " is not TRACEABLE: its calls are missing from traces");
    }
    trace = guard.full_tensors_path();
    s.forward();
  }
  std::set<std::string> traced;
  collect_module_paths(boost::json::parse(read_text(trace)), traced);
  const std::string root(s.model->traced_name());
  for (const auto& item : s.model->named_modules("", /*include_self=*/false)) {
    if (tracetorch::detail::is_container(*item.value())) continue;  // a ModuleList is never called, in Python either
    const std::string path = root + "." + item.key();
    DOCTEST_CHECK_MESSAGE(traced.count(path) == 1, path << " is registered but was not called in the traced forward");
  }
}

/// The debugger runs the forward under no-grad without changing its result, and leaves grad
/// mode, training mode, parameters and attachments as they were.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_debugger_restores_state) {
  require_traceable_model<Tester>();
  DOCTEST_REQUIRE(torch::GradMode::is_enabled());
  const auto reference = s.forward();
  DOCTEST_REQUIRE_MESSAGE(reference.last_hidden_state.requires_grad(), "the model has no parameter that requires grad");
  std::vector<std::pair<torch::Tensor, torch::Tensor>> parameters;  // (parameter, copy)
  for (const auto& p : s.model->parameters()) parameters.emplace_back(p, p.detach().clone());
  const bool training = s.model->is_training();
  ScratchDir dir;
  {
    auto guard = model_addition_debugger(s.model, {.debug_path = dir.path(), .do_prune_layers = false});
    const auto traced = s.forward();
    DOCTEST_CHECK_MESSAGE(!traced.last_hidden_state.requires_grad(), "the traced forward did not run under no-grad");
    DOCTEST_CHECK_MESSAGE(torch::GradMode::is_enabled(), "grad mode still off after the traced forward");
    check_close("last_hidden_state under the debugger", traced.last_hidden_state, reference.last_hidden_state, 0, 0);
    DOCTEST_CHECK(std::filesystem::exists(guard.full_tensors_path()));
    DOCTEST_CHECK(std::filesystem::exists(guard.summary_path()));
  }
  DOCTEST_CHECK(torch::GradMode::is_enabled());
  DOCTEST_CHECK(s.model->is_training() == training);
  for (const auto& [parameter, copy] : parameters) {
    DOCTEST_CHECK(parameter.requires_grad());
    DOCTEST_CHECK(torch::equal(parameter.detach(), copy));
  }
  for (const auto& module : s.model->modules(/*include_self=*/true)) {
    if (const auto* traced = dynamic_cast<const tracetorch::detail::TracedModuleBase*>(module.get())) {
      DOCTEST_CHECK_MESSAGE(traced->attachments_.load() == nullptr, "a module still has the debugger attached");
    }
  }
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  const auto after = s.forward();
  DOCTEST_CHECK(after.last_hidden_state.requires_grad());
  std::size_t files_after = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files_after;
  DOCTEST_CHECK_MESSAGE(files_after == files, "a forward after the scope ended still wrote a trace");
}

}  // namespace tracetorch::testing::detail
