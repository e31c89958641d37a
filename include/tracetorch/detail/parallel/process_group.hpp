#pragma once
/// \file
/// Joining a tensor-parallel group as torchrun's ranks do: RANK, WORLD_SIZE, MASTER_ADDR and
/// MASTER_PORT from the environment, a c10d TCPStore rendezvous (rank 0 serves it), then a Gloo
/// process group over it. This file is the only one that needs Gloo's headers (libgloo-dev) and
/// c10d's USE_C10D_GLOO: the target tracetorch::c10d sets both.

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/parallel/linear.hpp"

#ifndef USE_C10D_GLOO
#error "tracetorch/detail/parallel/process_group.hpp needs USE_C10D_GLOO (link the target tracetorch::c10d)"
#endif

namespace tracetorch::detail {

/// The rendezvous torchrun describes with environment variables.
struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
};

/// An environment variable as a whole number in [low, high]; Error naming it otherwise.
inline std::optional<long> environment_number(const char* name, long low, long high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < low || value > high) {
    throw Error(std::string(name) + "=" + text + ": expected a whole number in [" + std::to_string(low) + ", " +
                std::to_string(high) + "]");
  }
  return value;
}

/// The rendezvous of this process when WORLD_SIZE is set (RANK and MASTER_PORT must then be
/// too; MASTER_ADDR defaults to loopback); nullopt without WORLD_SIZE.
inline std::optional<RankEnvironment> rank_environment() {
  const auto world = environment_number("WORLD_SIZE", 1, 4096);
  if (!world) return std::nullopt;
  RankEnvironment env;
  env.world_size = static_cast<int>(*world);
  const auto rank = environment_number("RANK", 0, *world - 1);
  if (!rank) throw Error("WORLD_SIZE=" + std::to_string(*world) + " is set but RANK is not");
  env.rank = static_cast<int>(*rank);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  const auto port = environment_number("MASTER_PORT", 1, 65535);
  if (!port && env.world_size > 1) throw Error("WORLD_SIZE=" + std::to_string(*world) + " is set but MASTER_PORT is not");
  if (port) env.master_port = static_cast<std::uint16_t>(*port);
  return env;
}

/// Joins the group: a TCPStore (rank 0 its server, waiting for every rank up to `timeout`), then
/// ProcessGroupGloo, whose collectives also give up after `timeout` (a dead peer ends the wait
/// sooner: its sockets close).
inline TensorParallel join_process_group(const RankEnvironment& env, std::chrono::milliseconds timeout) {
  TensorParallel parallel{env.rank, env.world_size, {}};
  if (env.world_size == 1) return parallel;
  c10d::TCPStoreOptions store_options;
  store_options.port = env.master_port;
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                      : c10d::ProcessGroupGloo::createDefaultDevice());
  parallel.group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
  return parallel;
}

}  // namespace tracetorch::detail
