#pragma once
// tracetorch_bench --post-costs: what reading a trace back costs, against its size. After the
// timed modes, the traces (d) and (e) left in --out are diffed against themselves (every value
// read and compared on both sides) and the annotated model replays the (e) trace (every call
// run again on its recorded inputs). Each is timed once, with the process's peak RSS over its
// RSS before (VmHWM reset through /proc/self/clear_refs, as the bench's other peaks).

#include <tracetorch/diff.hpp>
#include <tracetorch/replay.hpp>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>

namespace bench_costs {

/// A line of /proc/self/status in MiB (VmRSS, VmHWM).
inline double status_mib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return -1;
}

/// Bytes under `dir` (regular files, hard links counted once each name: what a reader reads).
inline double megabytes_under(const std::filesystem::path& dir) {
  std::uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return static_cast<double>(bytes) / 1e6;
}

/// Times `work` once; one markdown row: config, shape, what, trace size, seconds, peak RSS.
inline std::string row(const std::string& config, const std::string& shape, const std::string& what, double trace_mb,
                const std::function<std::string()>& work) {
  std::ofstream("/proc/self/clear_refs") << "5";
  const double before = status_mib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  const std::string result = work();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream out;
  out << std::fixed << "| " << config << " | " << shape << " | " << what << " | " << std::setprecision(1) << trace_mb
      << " MB | " << std::setprecision(3) << seconds << " | +" << std::setprecision(0) << status_mib("VmHWM") - before
      << " MiB | " << result << " |\n";
  return out.str();
}

/// The diff of each trace against itself and the replay of the (e) trace, as a markdown table.
template <class Model>
std::string costs_table(const std::string& config, const std::string& shape, Model& model,
                 const std::filesystem::path& repr_dir, const std::filesystem::path& files_dir) {
  std::string table = "\n| config | batch x seq | operation | trace size | seconds | peak RSS over before | result |\n"
                      "| --- | --- | --- | --- | --- | --- | --- |\n";
  const auto diff = [](const std::filesystem::path& dir) {
    return [dir] {
      const auto report = tracetorch::diff_traces(dir, dir);
      return std::to_string(report.tensors.size()) + " values compared" +
             (report.first_divergence ? ", DIVERGES (a trace against itself!)" : ", no divergence");
    };
  };
  if (std::filesystem::exists(repr_dir)) {
    table += row(config, shape, "diff, use_repr=true trace against itself", megabytes_under(repr_dir), diff(repr_dir));
  }
  if (!std::filesystem::exists(files_dir)) return table;
  const double files_mb = megabytes_under(files_dir);
  table += row(config, shape, "diff, use_repr=false trace against itself", files_mb, diff(files_dir));
  table += row(config, shape, "module replay of the use_repr=false trace", files_mb, [&] {
    const auto report = tracetorch::replay(model, files_dir);
    return std::to_string(report.calls.size()) + " calls: " + std::to_string(report.count(tracetorch::ReplayStatus::match)) +
           " match, " + std::to_string(report.count(tracetorch::ReplayStatus::diverges)) + " diverge, " +
           std::to_string(report.count(tracetorch::ReplayStatus::not_replayable)) + " not replayable";
  });
  return table;
}

}  // namespace bench_costs
