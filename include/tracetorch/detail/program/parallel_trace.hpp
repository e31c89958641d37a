#pragma once
/// \file
/// The parts of a tensor-parallel trace program (tracetorch/distributed.hpp) that know no
/// port: `--world-size N` taken from the command line, the rank's trace directory, and the
/// faults the tests inject (a rank killed at a chosen point).

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/program/command_line.hpp"
#include "tracetorch/detail/parallel/rank_trace.hpp"

namespace tracetorch::detail {

inline constexpr char kWorldSizeUsage[] =
    "  --world-size N     tensor parallelism: start N ranks on this machine (a TCPStore rendezvous on\n"
    "                     127.0.0.1 and Gloo), each tracing into DIR/rank_<r>/ with its shard specs;\n"
    "                     a rank may also be started alone with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT\n";

/// The command line without `--world-size N` (or `--world-size=N`), and N (1 when absent).
inline std::pair<std::vector<std::string>, int> take_world_size(int argc, char** argv) {
  std::vector<std::string> rest;
  int world_size = 1;
  for (int i = 0; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string value;
    if (arg == "--world-size") {
      if (i + 1 >= argc) throw command_line::UsageError("--world-size needs a number of ranks");
      value = argv[++i];
    } else if (arg.starts_with("--world-size=")) {
      value = std::string(arg.substr(std::string_view("--world-size=").size()));
    } else {
      rest.emplace_back(arg);
      continue;
    }
    world_size = command_line::parse_number<int>("--world-size", value, 1);
  }
  return {rest, world_size};
}

/// Where rank `rank` of `world_size` writes its trace: DIR itself with one rank, else DIR/rank_<r>.
inline std::filesystem::path rank_trace_directory(const std::filesystem::path& debug_path, int rank, int world_size) {
  return world_size > 1 ? debug_path / rank_directory_name(rank) : debug_path;
}

/// Test fault injection: TRACETORCH_FAULT_KILL_RANK=R kills rank R with SIGKILL at the point
/// TRACETORCH_FAULT_KILL_AT names ("forward": before its forward, whose collectives the others
/// then wait on; "trace", the default: after its forward, before its shard specs are written).
inline void maybe_kill_rank(int rank, std::string_view point) {
  const char* victim = std::getenv("TRACETORCH_FAULT_KILL_RANK");
  if (victim == nullptr || std::atoi(victim) != rank) return;
  const char* at = std::getenv("TRACETORCH_FAULT_KILL_AT");
  if (point == ((at != nullptr && *at != '\0') ? std::string_view(at) : std::string_view("trace"))) ::raise(SIGKILL);
}

}  // namespace tracetorch::detail
