#pragma once
/// \file
/// One trace program per port, in one line: a `main` that loads a config, weights and inputs,
/// calls the model with keywords under the model addition debugger, or replays it module by
/// module against a reference trace.
///
/// \code
/// #include "gemma/gemma.hpp"
/// #include <tracetorch/trace_program.hpp>
///
/// int main(int argc, char** argv) {
///   return tracetorch::trace_main<gemma::GemmaModel, gemma::GemmaConfig>(
///       argc, argv, {.program = "gemma_trace", .checkpoint = {.dtype = tracetorch::checkpoint::DtypePolicy::convert}});
/// }
/// \endcode
///
/// The program takes `--config` (read by `Config::from_json_file`; where that also takes a
/// `tracetorch::ConfigReport*`, the file's keys no field takes are one line on stderr), `--set
/// KEY=VALUE` (a config field as a Python literal, set after --config and checked again by the
/// port's validate hook; the config struct must be declared with TRACETORCH_CONFIG), `--weights` (a file, folder or
/// sharded index, through tracetorch::checkpoint::load), `--debug-path`, `--safetensors`,
/// `--no-prune-layers`, `--shared-call-files` (DebuggerOptions::repeated_call_files = shared), `--input-ids` (else random ids from `--batch`, `--seq`, `--seed`),
/// `--inputs FILE.safetensors` (each tensor passed as the keyword of its name), `--call KEY=VALUE`
/// (a keyword of the root call as a Python literal, set by the keyword struct's declared names;
/// an unknown name or a wrong type exits 2 listing the names), `--output-hidden-states`,
/// `--output-attentions`, `--dump-captured DIR`, `--replay REF_TRACE [--accept RULES] [--json REPORT] [--html REPORT.html]`
/// (docs/reference/replay.md) and `--find-nonfinite` (the first module call whose outputs hold
/// NaN or Inf, printed, exit 3; without --debug-path no trace is written). The root call's arguments are the model
/// forward's own parameter types (keyword structs, tracetorch::OutputOptions), default-constructed
/// and set by name. Exit status: 0, 1 (an error, one line on stderr), 2 (a bad command line),
/// with --replay 1 when a call diverges, with --find-nonfinite 3 when a non-finite value is found.

#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <string>

#include "tracetorch/checkpoint.hpp"
#include "tracetorch/debugger.hpp"
#include "tracetorch/diff.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/html_report.hpp"
#include "tracetorch/nonfinite.hpp"
#include "tracetorch/output.hpp"
#include "tracetorch/replay.hpp"
#include "tracetorch/detail/program/trace_main.hpp"

namespace tracetorch {

/// What a port's trace program sets beyond the common flags.
struct TraceProgramOptions {
  /// The program's name, in its messages and usage ("gemma_trace").
  std::string program = "trace";
  /// Which port it runs, for the usage text ("the example Gemma port").
  std::string about;
  /// What runs without --config, for the usage text.
  std::string config_default = "the config struct's defaults";
  /// How --weights is loaded (a bf16 checkpoint into a float32 port: DtypePolicy::convert).
  checkpoint::Options checkpoint;
};

namespace detail {

/// `--replay` as the trace programs run it: the report printed in one write after `heading`,
/// --json and --html written with `file_tag` before their extension ("", or ".rank_1" for a
/// tensor-parallel rank), exit status 1 when a call diverges. `prepare` may change the reference
/// before the replay (a rank takes its slices).
template <class Model>
int run_program_replay(Model& model, const TraceArguments& args, const std::string& heading = {}, const std::string& file_tag = {},
                       const std::function<void(Trace&)>& prepare = {}) {
  ReplayOptions options;
  if (args.replay_accept) options.accept = ::tracetorch::load_accept_rules(*args.replay_accept);
  const std::string root(model->traced_name());
  const ReplayReport report = replay_model(*model, root, *args.replay, options, prepare);
  const auto tagged = [&](const std::filesystem::path& path) {
    return path.parent_path() / (path.stem().string() + file_tag + path.extension().string());
  };
  std::string text = heading + ::tracetorch::replay_report_text(report, root);
  if (args.replay_json) {
    write_text_file(tagged(*args.replay_json), ::tracetorch::replay_report_json(report));
    text += "wrote " + tagged(*args.replay_json).string() + "\n";
  }
  if (args.replay_html) {
    const boost::json::value calls = boost::json::parse(::tracetorch::replay_report_json(report));
    ::tracetorch::write_html_report(tagged(*args.replay_html), nullptr, &calls);
    text += "wrote " + tagged(*args.replay_html).string() + "\n";
  }
  std::cout << text << std::flush;  // one write: the ranks of a tensor-parallel program share the terminal
  return report.count(ReplayStatus::diverges) > 0 ? 1 : 0;
}

}  // namespace detail

/// What trace_main does with a model: the traced call, the checkpoint load, the replay (a
/// tensor-parallel program, tracetorch/distributed.hpp, wraps them).
template <class Model>
detail::TraceProgramHooks<Model> trace_program_hooks() {
  detail::TraceProgramHooks<Model> hooks;
  hooks.trace = [](Model& model, const detail::TraceArguments& args, const std::function<void()>& call) {
    detail::TracedFiles files;
    if (args.debug_path.empty()) {  // --find-nonfinite alone: the sentinel, no trace written
      auto sentinel = find_nonfinite(model);
      call();
      if (const auto found = sentinel.first()) files.first_nonfinite = found->message();
      return files;
    }
    auto guard = model_addition_debugger(model, {.debug_path = args.debug_path, .do_prune_layers = args.prune_layers,
                                                 .use_repr = args.use_repr, .rank = args.debugger_rank,
                                                 .find_nonfinite = args.find_nonfinite,
                                                 .repeated_call_files = args.shared_call_files ? RepeatedCallFiles::shared
                                                                                               : RepeatedCallFiles::numbered});
    call();
    files.summary = guard.summary_path();
    files.full_tensors = guard.full_tensors_path();
    if (const auto found = guard.first_nonfinite()) files.first_nonfinite = found->message();
    return files;
  };
  hooks.load_weights = [](Model& model, const std::filesystem::path& weights, const checkpoint::Options& load) {
    checkpoint::load(*model, weights, load);
  };
  hooks.replay = [](Model& model, const detail::TraceArguments& args) { return detail::run_program_replay(model, args); };
  return hooks;
}

/// The whole program: parses argv, runs, returns the exit status (see the file comment).
template <class Model, class Config>
int trace_main(int argc, char** argv, const TraceProgramOptions& options = {}) {
  return detail::trace_main<Model, Config>(
      argc, argv, detail::TraceProgramSettings{options.program, options.about, options.config_default, options.checkpoint},
      trace_program_hooks<Model>());
}

}  // namespace tracetorch
