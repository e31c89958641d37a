#pragma once
/// \file
/// Tensor-parallel trace programs on c10d: join a group as torchrun's ranks do, start N ranks on
/// this machine, and trace every rank. Opt-in: not included by tracetorch.hpp; link the CMake
/// target tracetorch::c10d (Gloo's headers, libgloo-dev, and c10d's USE_C10D_GLOO).
///
/// \code
/// // examples/llama_tp/llama_tp_trace.cpp: `llama_trace --world-size 2 --debug-path dbg ...`
/// int main(int argc, char** argv) {
///   return tracetorch::parallel_trace_main<llama_tp::LlamaModel, llama_tp::LlamaConfig>(
///       argc, argv, {.program = "llama_trace"});
/// }
/// \endcode
///
/// `--world-size N` (N > 1) starts N copies of the program with RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, and waits for them; a rank that fails takes the
/// others down in bounded time (they get 10 s to finish, then SIGTERM, then SIGKILL, by pid).
/// A rank (WORLD_SIZE set, as torchrun sets it) joins a TCPStore rendezvous and a Gloo group, sets
/// nn::process_tensor_parallel(), loads --weights with nn::load_sharded, and traces into
/// DEBUG_PATH/rank_<r>/ (the transformers files, untouched) with rank_<r>/tracetorch_shards.json:
/// the shard spec (dim, offset, size, full shape) of each sharded value. Rank 0 also writes
/// DEBUG_PATH/tracetorch_ranks.json, the index `tracetorch-diff` merges the ranks from.

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "tracetorch/nn/parallel.hpp"
#include "tracetorch/trace_program.hpp"
#include "tracetorch/detail/parallel/launcher.hpp"
#include "tracetorch/detail/parallel/process_group.hpp"
#include "tracetorch/detail/parallel/rank_replay.hpp"
#include "tracetorch/detail/program/exception_message.hpp"
#include "tracetorch/detail/program/parallel_trace.hpp"

namespace tracetorch {

/// Whether a command line asks for tensor parallelism: `--world-size` given, or WORLD_SIZE above
/// 1 in the environment (a rank started by a launcher or torchrun).
/// `--help` counts too: the parallel program's usage lists --world-size.
inline bool tensor_parallel_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--world-size" || arg.starts_with("--world-size=") || arg == "--help" || arg == "-h") return true;
  }
  const char* world = std::getenv("WORLD_SIZE");
  return world != nullptr && std::atoi(world) > 1;
}

/// What a tensor-parallel trace program sets beyond trace_main's options.
struct ParallelTraceOptions {
  /// Modules split over the ranks besides the parallel linears, added to a rank's layout from it
  /// (the MLP's act_fn, elementwise on the column-parallel features: nn::ParallelStyle::local).
  std::function<void(std::vector<nn::ModuleShard>&)> extend_layout;
  /// The rendezvous' and the collectives' time limit.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// How long the other ranks may go on once one has failed, before they are stopped.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
};

/// Joins the group this process's environment describes (RANK, WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT); one rank alone without WORLD_SIZE.
inline nn::TensorParallel join_process_group_from_environment(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto env = detail::rank_environment();
  return env ? detail::join_process_group(*env, timeout) : nn::TensorParallel{};
}

/// trace_main's hooks for rank `parallel`: the sharded load, and the trace into rank_<r>/ with
/// its shard specs.
template <class Model>
detail::TraceProgramHooks<Model> parallel_trace_hooks(const nn::TensorParallel& parallel, const ParallelTraceOptions& options) {
  auto hooks = trace_program_hooks<Model>();
  hooks.load_weights = [](Model& model, const std::filesystem::path& weights, const checkpoint::Options& load) {
    nn::load_sharded(*model, weights, load);
  };
  if (parallel.world_size == 1) return hooks;
  hooks.trace = [trace = hooks.trace, parallel, options](Model& model, const detail::TraceArguments& args,
                                                         const std::function<void()>& call) {
    auto rank_args = args;
    rank_args.debugger_rank = 0;  // every rank records, each into its own directory
    if (!args.debug_path.empty()) {
      rank_args.debug_path = detail::rank_trace_directory(args.debug_path, parallel.rank, parallel.world_size);
      if (parallel.rank == 0) detail::write_rank_index(args.debug_path, parallel.world_size);
    }
    const auto files = trace(model, rank_args, [&] {
      detail::maybe_kill_rank(parallel.rank, "forward");
      call();
      detail::maybe_kill_rank(parallel.rank, "trace");
    });
    if (!files.full_tensors.empty()) {
      auto layout = nn::parallel_layout(*model, std::string(model->traced_name()));
      if (options.extend_layout) options.extend_layout(layout);
      detail::write_shard_specs(rank_args.debug_path, files.full_tensors, parallel.rank, parallel.world_size, layout);
    }
    return files;
  };
  // Each rank replays every call on its slices of the reference's values (rank_replay.hpp), in
  // the reference's order on every rank, so the calls' own collectives meet; each prints its
  // report under its rank and writes --json/--html as NAME.rank_<r>.EXT.
  hooks.replay = [parallel, options](Model& model, const detail::TraceArguments& args) {
    auto layout = nn::parallel_layout(*model, std::string(model->traced_name()));
    if (options.extend_layout) options.extend_layout(layout);
    return detail::run_program_replay(model, args,
                                      "rank " + std::to_string(parallel.rank) + " of " + std::to_string(parallel.world_size) + ": ",
                                      ".rank_" + std::to_string(parallel.rank),
                                      [&](detail::Trace& ref) { detail::slice_reference_for_rank(ref, layout); });
  };
  return hooks;
}

/// The whole tensor-parallel program (see the file comment): the launcher with --world-size N,
/// else one rank. Exit status as trace_main's; the launcher's: the first failed rank's.
template <class Model, class Config>
int parallel_trace_main(int argc, char** argv, const TraceProgramOptions& options = {}, const ParallelTraceOptions& parallel = {}) {
  try {
    auto [arguments, world_size] = detail::take_world_size(argc, argv);
    const auto env = detail::rank_environment();
    if (world_size > 1 && !env) return detail::launch_ranks(options.program, "/proc/self/exe", arguments, world_size, parallel.grace);
    if (env && world_size > 1 && env->world_size != world_size) {
      throw Error("--world-size " + std::to_string(world_size) + " but WORLD_SIZE=" + std::to_string(env->world_size));
    }
    const auto tp = env ? detail::join_process_group(*env, parallel.timeout) : nn::TensorParallel{};
    nn::process_tensor_parallel() = tp;
    std::vector<char*> rest;
    for (auto& a : arguments) rest.push_back(a.data());
    rest.push_back(nullptr);
    detail::TraceProgramSettings settings{options.program, options.about, options.config_default, options.checkpoint,
                                          tp.world_size > 1, detail::kWorldSizeUsage};
    return detail::trace_main<Model, Config>(static_cast<int>(arguments.size()), rest.data(), settings,
                                             parallel_trace_hooks<Model>(tp, parallel));
  } catch (const detail::command_line::UsageError& e) {
    std::cerr << options.program << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << options.program << ": error: " << detail::exception_message(e) << "\n";
    return 1;
  }
}

}  // namespace tracetorch
