#pragma once
/// \file
/// Module replay: every module call of a port run on the inputs a reference trace recorded for
/// that call, and judged in isolation, so that all independent bugs show in one run.
///
/// \code
/// LlamaModel model(config);
/// tracetorch::checkpoint::load(*model, "model.safetensors");
/// model->eval();
/// const auto report = tracetorch::replay(model, "reference_trace_st");   // a use_repr=False trace
/// for (const auto* call : report.innermost_diverging()) std::cout << call->path << ": " << call->reason << "\n";
/// std::cout << tracetorch::replay_report_text(report, "LlamaModel");
/// \endcode
///
/// - Each recorded call of a traced module (its path and per-path call index) is replayed once:
///   its positional arguments and keywords rebuilt into the forward's parameter types (tensors
///   from the trace's files; None, True, False, numbers and strings from their reprs; tuples and
///   lists; keyword structs by name), its forward run, its outputs compared where the reference
///   recorded them (leaves, and the root's output files), and the arguments it passes to each
///   module it calls compared with those the reference recorded for them. Modules below it run
///   as the port computes them, so a diverging call with no diverging call below it (`innermost`)
///   is a difference in that module's own code.
/// - Values are compared with the diff's tolerance and cross-dtype rules (ReplayOptions). An
///   object's repr (a cache) is not compared.
/// - A call is not replayable when the trace cannot rebuild an argument (an object: a cache is
///   replayed as an empty cache of the argument's kind where the call is a first forward, its
///   cache_position starting at 0), when a later call overwrote its values (Python's debugger
///   gives a repeated call's files one name), when the port has no traced module at its path or
///   its forward is overloaded. Each such call says why, and how it could be made replayable.
/// - The report lists the innermost diverging calls first, then every other call in execution
///   order; replay_report_json writes it as docs/reference/replay.md describes.
///
/// The steps are in detail/program/: replay_call (arguments rebuilt, the forward run: the traced
/// class's replay_forward), replay_values, replay_observer, replay_compare, replay_engine, replay_report.

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/detail/program/replay_engine.hpp"
#include "tracetorch/detail/program/replay_report.hpp"
#include "tracetorch/replay/types.hpp"

namespace tracetorch {

/// Replays `model` (a TRACEABLE holder) against the use_repr=False trace at `reference` (its
/// directory or its _FULL_TENSORS.json); throws tracetorch::Error where the trace cannot be read.
template <class Model>
ReplayReport replay(Model& model, const std::filesystem::path& reference, const ReplayOptions& options = {}) {
  return detail::replay_model(*model, std::string(model->traced_name()), reference, options);
}

/// The report as the trace programs print it: a summary line, the innermost diverging calls, the
/// other diverging calls, the calls not replayable with why and how.
inline std::string replay_report_text(const ReplayReport& report, std::string_view root) {
  return detail::replay_report_text(report, root);
}

/// The report as a JSON array of call objects (docs/reference/replay.md).
inline std::string replay_report_json(const ReplayReport& report) { return detail::replay_report_json(report); }

}  // namespace tracetorch
