#pragma once
/// \file
/// Starting the ranks of a tensor-parallel run on this machine, as torchrun does: N copies of
/// this program, each with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and a free
/// MASTER_PORT. A rank that dies takes the group down in bounded time: the others get `grace`
/// to finish (their collectives fail as soon as the dead peer's sockets close), then SIGTERM,
/// then SIGKILL, each by its pid; every child is reaped. No LibTorch.

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tracetorch/error.hpp"

extern char** environ;

namespace tracetorch::detail {

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice).
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw Error("cannot find a free port on 127.0.0.1");
  return ntohs(address.sin_port);
}

/// One started rank.
struct LaunchedRank {
  int rank = 0;
  pid_t pid = -1;
  bool done = false;
  int status = 0;  // waitpid's
};

/// "exit 1", "killed by signal 9".
inline std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

/// Starts `program` with `arguments` (argv[0] first) as rank `rank` of `world_size`.
inline pid_t spawn_rank(const std::string& program, const std::vector<std::string>& arguments, int rank, int world_size,
                        int port) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    if (name != "RANK" && name != "WORLD_SIZE" && name != "LOCAL_RANK" && name != "MASTER_ADDR" && name != "MASTER_PORT") {
      env_strings.push_back(entry);
    }
  }
  env_strings.push_back("RANK=" + std::to_string(rank));
  env_strings.push_back("LOCAL_RANK=" + std::to_string(rank));
  env_strings.push_back("WORLD_SIZE=" + std::to_string(world_size));
  env_strings.push_back("MASTER_ADDR=127.0.0.1");
  env_strings.push_back("MASTER_PORT=" + std::to_string(port));
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = arguments;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int error = ::posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv.data(), envp.data()); error != 0) {
    throw Error("cannot start rank " + std::to_string(rank) + " (" + program + "): " + std::strerror(error));
  }
  return pid;
}

/// Set by SIGTERM, SIGINT or SIGHUP while the launcher waits: the ranks are stopped with it.
inline volatile std::sig_atomic_t& launcher_stop_requested() {
  static volatile std::sig_atomic_t requested = 0;
  return requested;
}

inline void tracetorch_launcher_on_signal(int) { launcher_stop_requested() = 1; }

/// Reaps whichever ranks have ended; true when all have.
inline bool reap_ranks(std::vector<LaunchedRank>& ranks) {
  bool all = true;
  for (auto& r : ranks) {
    if (r.done) continue;
    if (::waitpid(r.pid, &r.status, WNOHANG) == r.pid) {
      r.done = true;
    } else {
      all = false;
    }
  }
  return all;
}

/// Sends `signal` to every rank still running, by pid.
inline void signal_ranks(const std::vector<LaunchedRank>& ranks, int signal) {
  for (const auto& r : ranks) {
    if (!r.done) ::kill(r.pid, signal);
  }
}

/// Waits for the ranks; once one has failed, the others get `grace`, then SIGTERM and, 5 s
/// later, SIGKILL. Reports each failed rank on stderr as `program: rank R: ...`.
inline void supervise_ranks(const std::string& program, std::vector<LaunchedRank>& ranks, std::chrono::milliseconds grace) {
  using clock = std::chrono::steady_clock;
  std::optional<clock::time_point> failed_at;
  bool terminated = false;
  while (!reap_ranks(ranks)) {
    if (launcher_stop_requested() && !failed_at) {  // the launcher itself is stopped: no orphaned ranks
      failed_at = clock::now() - grace;
    }
    for (const auto& r : ranks) {
      if (!failed_at && r.done && !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) failed_at = clock::now();
    }
    if (failed_at && !terminated && clock::now() - *failed_at > grace) {
      std::cerr << program << ": a rank failed; stopping the others (SIGTERM)\n";
      signal_ranks(ranks, SIGTERM);
      terminated = true;
    }
    if (terminated && clock::now() - *failed_at > grace + std::chrono::seconds(5)) {
      signal_ranks(ranks, SIGKILL);
      for (auto& r : ranks) {
        if (!r.done && ::waitpid(r.pid, &r.status, 0) == r.pid) r.done = true;  // SIGKILL: returns
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& r : ranks) {
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) {
      std::cerr << program << ": rank " << r.rank << " (pid " << r.pid << "): " << describe_wait_status(r.status) << "\n";
    }
  }
}

/// Runs `world_size` ranks of `program` on loopback and waits for them (see the file comment).
/// The exit status: 0 when every rank exited 0, else the first failed rank's exit status (1 for a
/// rank killed by a signal).
inline int launch_ranks(const std::string& program_name, const std::string& executable, const std::vector<std::string>& arguments,
                        int world_size, std::chrono::milliseconds grace) {
  const int port = free_loopback_port();
  struct sigaction on_stop {};
  on_stop.sa_handler = tracetorch_launcher_on_signal;
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(signal, &on_stop, nullptr);
  std::vector<LaunchedRank> ranks;
  try {
    for (int rank = 0; rank < world_size; ++rank) ranks.push_back({rank, spawn_rank(executable, arguments, rank, world_size, port)});
  } catch (...) {
    signal_ranks(ranks, SIGKILL);
    for (auto& r : ranks) ::waitpid(r.pid, &r.status, 0);
    throw;
  }
  supervise_ranks(program_name, ranks, grace);
  for (const auto& r : ranks) {
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0) return WEXITSTATUS(r.status);
    if (!WIFEXITED(r.status)) return 1;
  }
  return 0;
}

}  // namespace tracetorch::detail
