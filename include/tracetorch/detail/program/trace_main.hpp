#pragma once
/// \file
/// The body of tracetorch::trace_main: the command line read and checked against the root call's
/// keywords, then the traced call or the replay. The debugger, the checkpoint loader and the
/// replay come from the public layer as hooks (a detail file includes no public header).

#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "tracetorch/checkpoint/options.hpp"
#include "tracetorch/config_file.hpp"
#include "tracetorch/detail/debugger/session.hpp"  // rank_from_environment
#include "tracetorch/detail/program/exception_message.hpp"
#include "tracetorch/detail/program/memory_check.hpp"
#include "tracetorch/detail/program/trace_run.hpp"

namespace tracetorch::detail {

struct TraceProgramSettings {
  std::string program, about, config_default;
  checkpoint::Options checkpoint;
  /// True in a rank of a tensor-parallel run: every rank traces (into its own rank_<r>/).
  bool every_rank_traces = false;
  /// Lines added to the usage text (a parallel program's --world-size).
  std::string extra_usage;
};

/// The files a traced call wrote (none with --find-nonfinite alone), and the sentinel's finding.
struct TracedFiles {
  std::filesystem::path summary, full_tensors;
  std::optional<std::string> first_nonfinite;  // "first non-finite: PATH (call K) ...", with --find-nonfinite
};

/// What the public layer lends: the debugger around `call`, the checkpoint loader, the replay
/// (its exit status).
template <class Model>
struct TraceProgramHooks {
  std::function<TracedFiles(Model&, const TraceArguments&, const std::function<void()>&)> trace;
  std::function<void(Model&, const std::filesystem::path&, const checkpoint::Options&)> load_weights;
  std::function<int(Model&, const TraceArguments&)> replay;
};

template <class Model>
using RootCallOf = RootCall<typename model_forward_t<Model>::values>;

/// A command line read, and the root call's keywords it sets.
template <class Model>
struct ParsedTraceProgram {
  TraceArguments args;
  RootCallOf<Model> root;
};

/// `Config::from_json_file(path)`. Where the port's reader also takes a ConfigReport*, the keys
/// of the file that no field takes are one line on stderr (from rank 0 alone where ranks run): a
/// key the port does not read (a typo, an upstream feature not ported) is said, not silently left
/// at its default.
template <class Config>
Config read_program_config(const std::string& program, const std::filesystem::path& path) {
  if constexpr (requires(ConfigReport* report) { Config::from_json_file(path, report); }) {
    ConfigReport report;
    Config config = Config::from_json_file(path, &report);
    if (!report.unknown_keys.empty() && rank_from_environment() == 0) std::cerr << program << ": " << report.describe(path.string()) << " (ignored)\n";
    return config;
  } else {
    return Config::from_json_file(path);
  }
}

/// --set KEY=VALUE on the config read: each field by its full key (an attribute map's spelling
/// too) from a Python literal, then the port's validate hook again. An unknown key, a wrong type
/// or a failed check is an Error naming "--set" and the key; the config is left unchanged.
template <class Config>
void set_program_config_fields(Config& config, const TraceArguments& args) {
  if (args.config_fields.empty()) return;
  if constexpr (is_config_struct<Config>) {
    const std::string where = (args.config ? args.config->string() : std::string("the built-in config")) + " with --set";
    Config changed = config;  // all of them or none: a later key or the checks may refuse
    for (const auto& [key, literal] : args.config_fields) set_config_field(changed, key, literal, "--set");
    validate_config(changed, where);  // a hook that is not const (Qwen3's, deriving layer_types) runs too
    config = std::move(changed);
  } else {
    throw Error("--set needs a config struct declared with TRACETORCH_CONFIG");
  }
}

/// The model built from the config (seeded), its weights loaded, in eval mode.
template <class Model, class Config>
Model build_model(const Config& config, const TraceArguments& args, const TraceProgramSettings& settings,
                  const TraceProgramHooks<Model>& hooks) {
  torch::manual_seed(static_cast<std::uint64_t>(args.seed));  // the random weights, then the random ids, in this order
  Model model(config);
  model->eval();
  if (args.weights) hooks.load_weights(model, *args.weights, settings.checkpoint);
  return model;
}

/// The root call's inputs: --inputs, --input-ids (or random ids), the capture flags.
template <class Model, class Config>
void set_root_inputs(RootCallOf<Model>& root, const Config& config, const TraceArguments& args, torch::Tensor input_ids) {
  if (args.inputs) load_inputs_file(root, *args.inputs);
  if (!input_ids.defined() && !root.tensor("input_ids").defined() && root.takes("input_ids")) {
    input_ids = torch::randint(0, config_vocab_size(config) > 0 ? config_vocab_size(config) : 2, {args.batch, args.seq});
  }
  if (input_ids.defined()) root.set("input_ids", PythonValue::of_tensor(input_ids));
  PythonValue yes;
  yes.kind = PythonValue::Kind::boolean;
  yes.boolean = true;
  if (args.output_hidden_states) root.set("output_hidden_states", yes);
  if (args.output_attentions) root.set("output_attentions", yes);
}

/// Traces the root call and prints what it wrote; the exit status.
template <class Model, class Config>
int run_traced_call(Model& model, RootCallOf<Model>& root, const Config& config, const TraceArguments& args,
                    const TraceProgramSettings& settings, const TraceProgramHooks<Model>& hooks) {
  using Result = typename model_forward_t<Model>::result;
  std::optional<Result> output;
  const auto files = hooks.trace(model, args, [&] {
    output.emplace(std::apply([&](auto&... values) -> Result { return model->forward(values...); }, root.values));
  });
  std::cout << settings.program << ": traced " << traced_type_t<Model>::registered_name;
  if (const auto about = describe_config(config); !about.empty()) std::cout << " (" << about << ")";
  if (const auto ids = root.tensor("input_ids"); ids.defined()) std::cout << " on input_ids " << ids.sizes();
  if constexpr (requires { output->last_hidden_state.sizes(); }) {
    std::cout << " -> last_hidden_state " << output->last_hidden_state.sizes();
  }
  std::cout << "\n";
  if (!files.summary.empty()) {
    std::cout << "wrote " << files.summary.string() << "\n";
    std::cout << "wrote " << files.full_tensors.string() << (args.use_repr ? "" : " and one .safetensors file per tensor") << "\n";
  }
  if (args.dump_captured) dump_captured(settings.program, *args.dump_captured, *output);
  if (!files.summary.empty()) {
    std::cout << "leaf module outputs:\n";
    print_leaf_shapes_of(files.summary);
  }
  if (files.first_nonfinite) {  // the sentinel's exit status: 3, apart from errors (1) and usage (2)
    std::cout << *files.first_nonfinite << "\n";
    return 3;
  }
  if (args.find_nonfinite) std::cout << "no non-finite value in any module call's outputs\n";
  return 0;
}

/// Runs what `parsed` asks; the exit status (1: an error, printed as "PROGRAM: error: ...").
template <class Model, class Config>
int run_trace_program(ParsedTraceProgram<Model>& parsed, const TraceProgramSettings& settings,
                      const TraceProgramHooks<Model>& hooks) {
  const TraceArguments& args = parsed.args;
  try {
    // Only rank 0 records (the debugger's rule) unless every rank traces: another rank has
    // nothing to write, so it says so on stderr and stops before any work.
    if (const int rank = rank_from_environment(); rank != 0 && !settings.every_rank_traces) {
      std::cerr << settings.program << ": RANK=" << rank << ": rank " << rank
                << " writes nothing (only rank 0 traces; a tensor-parallel program traces every rank)\n";
      return 0;
    }
    // Everything read and checked before the model is built: a bad size or id is one line, no allocation.
    Config config = args.config ? read_program_config<Config>(settings.program, *args.config) : Config{};
    set_program_config_fields(config, args);
    torch::Tensor input_ids;
    if (args.input_ids) input_ids = read_input_ids(settings.program, *args.input_ids, config_vocab_size(config));
    if (!args.replay) {
      try {
        check_config_fits_in_memory(config, input_ids.defined() ? input_ids.size(0) : args.batch,
                                    input_ids.defined() ? input_ids.size(1) : args.seq);
      } catch (const Error& e) {  // the refusal names what it refuses: the config file, or the built-in one
        throw Error((args.config ? args.config->string() : std::string("the built-in config")) + ": " + e.what());
      }
    }
    Model model = build_model<Model>(config, args, settings, hooks);
    if (args.replay) return hooks.replay(model, args);
    set_root_inputs<Model>(parsed.root, config, args, input_ids);
    return run_traced_call(model, parsed.root, config, args, settings, hooks);
  } catch (const std::exception& e) {
    std::cerr << settings.program << ": error: " << exception_message(e) << "\n";
    return 1;
  }
}

/// Reads the command line and checks --call and --inputs against the root call's keywords.
template <class Model>
ParsedTraceProgram<Model> parse_trace_program(int argc, char** argv) {
  ParsedTraceProgram<Model> parsed{parse_trace_arguments(argc, argv), {}};
  apply_call_arguments(parsed.root, parsed.args);
  return parsed;
}

template <class Model, class Config>
int trace_main(int argc, char** argv, const TraceProgramSettings& settings, const TraceProgramHooks<Model>& hooks) {
  static_assert(model_forward_t<Model>::known, "tracetorch::trace_main: the model's forward must be one non-template function");
  const std::string usage = trace_usage(settings.program, traced_type_t<Model>::registered_name,
                                        settings.about.empty() ? std::string(traced_type_t<Model>::registered_name) : settings.about,
                                        settings.config_default) +
                            settings.extra_usage;
  return command_line::run_program(
      settings.program, usage, argc, argv, [](int c, char** v) { return parse_trace_program<Model>(c, v); },
      [&](ParsedTraceProgram<Model>& parsed) { return run_trace_program<Model, Config>(parsed, settings, hooks); });
}

}  // namespace tracetorch::detail
