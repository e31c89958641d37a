// tracetorch_bench: what tracing costs, as ratios to a plain LibTorch model, measured in one
// run with the modes interleaved (so load that comes and goes hits every mode alike) and the
// median of the repeats reported. See docs/performance.md.
//
//   tracetorch_bench [--config tiny|mid|seed004|both|moe] [--repeats N] [--out DIR] [--disk-mb N]
//                    [--modes abcdefgh] [--reuse-repeated-tensors on|off]
//                    [--reuse-previous-files on|off] [--prune-layers on|off] [--tiny-config PATH]
//                    [--batch N] [--seq N] [--samples FILE] [--export DIR] [--post-costs] [--world-size N]
// --prune-layers on traces as the debugger's default does (the middle layer blocks left out of
// the JSON files); off, the default here, records every layer, the costlier case.
// --export writes the config's model as a bundle (config.json, model.safetensors,
// input_ids.safetensors, last_hidden_state.safetensors) and exits: bench/side_by_side.py runs
// transformers' debugger on it. --samples writes every timed sample, one line per mode.

#include <llama/llama.hpp>
#ifdef TRACETORCH_BENCH_MOE
#include <qwen2_moe/qwen2_moe.hpp>
#endif
#ifdef TRACETORCH_BENCH_TP
#include <llama_tp/llama_tp.hpp>
#include <tracetorch/distributed.hpp>
#endif
#include <tracetorch/tracetorch.hpp>

#include "bench_costs.hpp"
#include "bench_export.hpp"
#include "plain_llama.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef TRACETORCH_BENCH_TINY_CONFIG
#define TRACETORCH_BENCH_TINY_CONFIG "tests/data/tiny_llama/config.json"
#endif

namespace fs = std::filesystem;

namespace {

struct Args {
  std::string config = "both";
  int repeats = 5;
  fs::path out = "tracetorch-bench";
  std::int64_t disk_mb = 512;
  fs::path tiny_config = TRACETORCH_BENCH_TINY_CONFIG;
  std::string modes = "abcdefg";  // which modes to time (a is always run: it is the baseline; h on request)
  bool reuse_repeated_tensors = true;
  bool reuse_previous_files = true;
  bool prune_layers = false;  // off: every layer's tensors recorded (the debugger's default is on)
  std::int64_t batch = 4;
  std::int64_t seq = 30;
  fs::path samples;  // empty: none written
  fs::path export_dir;  // not empty: write the bundle and exit
  bool post_costs = false;  // after timing: the diff and module replay of the traces left in --out
  int world_size = 0;  // --world-size N: the tensor-parallel Llama on N ranks (0: not asked)
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "tracetorch_bench: " << why
            << "\nusage: tracetorch_bench [--config tiny|mid|seed004|both|moe] [--repeats N] [--out DIR] [--disk-mb N]"
               " [--modes abcdefgh] [--reuse-repeated-tensors on|off] [--reuse-previous-files on|off] [--prune-layers on|off]"
               " [--tiny-config PATH]"
               " [--batch N] [--seq N] [--samples FILE] [--export DIR] [--post-costs] [--world-size N]\n";
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--config") {
      args.config = value();
      if (args.config != "tiny" && args.config != "mid" && args.config != "seed004" && args.config != "both" && args.config != "moe") {
        usage("unknown config " + args.config);
      }
    } else if (flag == "--repeats") {
      args.repeats = std::stoi(value());
      if (args.repeats < 1) usage("--repeats must be at least 1");
    } else if (flag == "--out") {
      args.out = value();
    } else if (flag == "--disk-mb") {
      args.disk_mb = std::stoll(value());
    } else if (flag == "--modes") {
      args.modes = value();
    } else if (flag == "--reuse-repeated-tensors") {
      const std::string on = value();
      if (on != "on" && on != "off") usage("--reuse-repeated-tensors takes on or off");
      args.reuse_repeated_tensors = on == "on";
    } else if (flag == "--reuse-previous-files") {
      const std::string on = value();
      if (on != "on" && on != "off") usage("--reuse-previous-files takes on or off");
      args.reuse_previous_files = on == "on";
    } else if (flag == "--prune-layers") {
      const std::string on = value();
      if (on != "on" && on != "off") usage("--prune-layers takes on or off");
      args.prune_layers = on == "on";
    } else if (flag == "--batch" || flag == "--seq") {
      const auto n = std::stoll(value());
      if (n < 1) usage(flag + " must be at least 1");
      (flag == "--batch" ? args.batch : args.seq) = n;
    } else if (flag == "--samples") {
      args.samples = value();
    } else if (flag == "--world-size") {
      args.world_size = std::stoi(value());
      if (args.world_size < 1) usage("--world-size must be at least 1");
    } else if (flag == "--post-costs") {
      args.post_costs = true;
    } else if (flag == "--export") {
      args.export_dir = value();
    } else if (flag == "--tiny-config") {
      args.tiny_config = value();
    } else if (flag == "-h" || flag == "--help") {
      usage("measures the cost of tracing");
    } else {
      usage("unknown option " + flag);
    }
  }
  return args;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string load_average() {
  std::string text = read_text("/proc/loadavg");
  std::istringstream in(text);
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

/// A line of /proc/self/status in MiB (VmRSS, VmHWM).
double status_mib(const std::string& key) {
  std::istringstream in(read_text("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;  // kB
  }
  return -1;
}

/// Resets VmHWM to the current RSS (Linux >= 4.0); false where the kernel refuses.
bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

/// Bytes of the regular files directly under `dir`: all of them, and those of distinct inodes
/// (a repeated tensor's file is a hard link to the first one: its bytes were written once).
struct DirectoryBytes {
  std::uint64_t all = 0;
  std::uint64_t distinct = 0;
};

DirectoryBytes bytes_under(const fs::path& dir) {
  DirectoryBytes bytes;
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const auto& entry : fs::directory_iterator(dir)) {
    struct stat info {};
    if (!entry.is_regular_file() || ::stat(entry.path().c_str(), &info) != 0) continue;
    bytes.all += static_cast<std::uint64_t>(info.st_size);
    if (seen.emplace(info.st_dev, info.st_ino).second) bytes.distinct += static_cast<std::uint64_t>(info.st_size);
  }
  return bytes;
}

/// Sequential write speed of the filesystem holding `dir`: `mb` MiB in 8 MiB writes, then
/// fsync, timed together (MB/s, MB = 10^6 bytes).
double disk_write_speed(const fs::path& dir, std::int64_t mb) {
  const fs::path path = dir / "disk-speed.tmp";
  std::vector<char> block(8 << 20);
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 131 + 7);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path.string());
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t written = 0;
  const std::uint64_t wanted = static_cast<std::uint64_t>(mb) << 20;
  while (written < wanted) {
    const auto chunk = std::min<std::uint64_t>(block.size(), wanted - written);
    const auto n = ::write(fd, block.data(), chunk);
    if (n <= 0) throw std::runtime_error("cannot write " + path.string());
    written += static_cast<std::uint64_t>(n);
  }
  ::fsync(fd);
  const double elapsed = seconds_since(start);
  ::close(fd);
  fs::remove(path);
  return static_cast<double>(written) / 1e6 / elapsed;
}

struct NamedConfig {
  std::string name;
  llama::LlamaConfig config;
  fs::path weights;  // empty: the seeded random initialisation
};

plain_llama::Config plain_config(const llama::LlamaConfig& c) {
  return {.vocab_size = c.vocab_size, .hidden_size = c.hidden_size, .intermediate_size = c.intermediate_size,
          .num_hidden_layers = c.num_hidden_layers, .num_attention_heads = c.num_attention_heads,
          .num_key_value_heads = c.num_key_value_heads, .rms_norm_eps = c.rms_norm_eps, .rope_theta = c.rope_theta};
}

/// Points every parameter of `to` at the storage of the parameter of `from` with the same name;
/// the two models must have exactly the same names and shapes. Shared rather than copied, so
/// that a ratio between the two models is not also a comparison of two weight layouts in memory
/// (copies made the annotated model 0.93-1.04x the plain one from run to run).
void share_weights(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto source = from.named_parameters(/*recurse=*/true);
  auto target = to.named_parameters(/*recurse=*/true);
  if (source.size() != target.size()) throw std::runtime_error("the plain and annotated models differ in parameter count");
  for (const auto& item : source) {
    auto* found = target.find(item.key());
    if (found == nullptr) throw std::runtime_error("the plain model has no parameter " + item.key());
    if (!found->sizes().equals(item.value().sizes())) throw std::runtime_error("the plain model's " + item.key() + " has another shape");
    found->set_data(item.value());
  }
}

enum Mode { kPlain, kAnnotated, kCapture, kDebugRepr, kDebugFiles, kPlainAgain, kPlainCollecting, kSentinel, kModes };
const char* const kModeNames[kModes] = {
    "(a) plain LibTorch", "(b) annotated, no trace", "(c) capture hidden_states+attentions",
    "(d) debugger use_repr=true", "(e) debugger use_repr=false", "(f) plain LibTorch again: noise floor",
    "(g) plain LibTorch, same outputs by hand", "(h) non-finite sentinel, no trace"};
// --config moe: there is no Qwen2-MoE in plain LibTorch, so the annotated model untraced is (a).
const char* const kMoeModeNames[kModes] = {
    "(a) annotated Qwen2-MoE, no trace (no plain MoE: the baseline)", "(b) n/a", "(c) capture hidden_states+attentions+router_logits",
    "(d) debugger use_repr=true", "(e) debugger use_repr=false", "(f) (a) again: noise floor", "(g) n/a",
    "(h) non-finite sentinel, no trace"};

struct Result {
  std::vector<double> times[kModes];
  DirectoryBytes files_bytes;
  int calls_per_sample = 1;
  int repeats = 0;
  double peak_rss_mib[kModes] = {};
  double rss_before_mib[kModes] = {};
  std::vector<double> page_faults[kModes];  // minor page faults per forward, per sample
  std::vector<double> cpu_seconds[kModes];  // user + system time of all threads per forward
  std::vector<double> sync_seconds[kModes];  // syncfs after each sample (all its calls)
  std::string costs;  // --post-costs: a markdown table, printed after the timings
  const char* const* mode_names = kModeNames;
};

/// The debugger's writing speed in (e), in MB/s of data written (hard links excluded): over the
/// whole traced forward, which no tracer can push past the plain forward's own time, and over
/// only the time tracing adds to the plain forward, which is spent writing and more.
struct WriteRates {
  double over_forward = 0;
  double over_added = 0;
};

WriteRates write_rates(const Result& result) {
  WriteRates rates;
  if (result.times[kDebugFiles].empty()) return rates;
  const double mb = static_cast<double>(result.files_bytes.distinct) / 1e6;
  const double traced = median(result.times[kDebugFiles]);
  const double added = traced - median(result.times[kPlain]);
  rates.over_forward = mb / traced;
  rates.over_added = added > 0 ? mb / added : 0.0;
  return rates;
}

/// Writes the dirty pages of the filesystem holding `dir` back to the disk (syncfs).
void sync_filesystem(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw std::runtime_error("cannot open " + dir.string());
  ::syncfs(fd);
  ::close(fd);
}

/// What getrusage says of this process so far: CPU time (user + system, all threads) and minor
/// page faults (first touches of fresh memory: on a VM, a large part of what an allocation costs).
struct Usage {
  double cpu_seconds;
  long page_faults;
};

Usage usage_so_far() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return {seconds(usage.ru_utime) + seconds(usage.ru_stime), usage.ru_minflt};
}

/// Times the selected modes of one model, interleaved in a new random order each repeat, then
/// each one's peak RSS; `run(mode)` makes one call.
void time_modes(const std::string& name, const Args& args, const std::function<void(Mode)>& run, const fs::path& files_dir,
                Result& result, int fixed_calls_per_sample = 0) {
  const auto selected = [&](int m) { return m == kPlain || args.modes.find(static_cast<char>('a' + m)) != std::string::npos; };
  // A tiny forward takes milliseconds: each sample then times several calls in a row.
  const auto start_warm = std::chrono::steady_clock::now();
  run(kPlain);
  const int calls_per_sample = fixed_calls_per_sample > 0
                                   ? fixed_calls_per_sample
                                   : static_cast<int>(std::clamp(0.05 / seconds_since(start_warm), 1.0, 50.0));
  // Two warm-ups, not counted: a trace writes over the files of the trace two before it (the
  // spares its publish kept), so the third trace into a directory is the first of the steady
  // state that a debugger left on sees. A first trace into an empty directory costs more
  // (docs/performance.md, "Side by side, seed004").
  for (int warm_up = 0; warm_up < 2; ++warm_up) {
    for (int m = 0; m < kModes; ++m) if (selected(m)) run(static_cast<Mode>(m));
  }
  result.calls_per_sample = calls_per_sample;
  // Samples of a fast forward are short and cheap: five times as many, for the same precision.
  const int repeats = calls_per_sample > 1 ? 5 * args.repeats : args.repeats;
  result.repeats = repeats;
  // Each repeat times the modes in a new random order (the same for every run): in a fixed
  // order, rotated or not, each mode follows the same one, and the mode after (e) ran 3-6%
  // slower (the plain model against itself, (f), measured 1.03-1.06).
  std::mt19937 shuffler(0);
  std::vector<int> order(kModes);
  std::iota(order.begin(), order.end(), 0);
  for (int r = 0; r < repeats; ++r) {
    std::cerr << "[" << name << "] repeat " << (r + 1) << "/" << repeats << " (load " << load_average() << ")\n";
    std::shuffle(order.begin(), order.end(), shuffler);
    for (const int m : order) {
      if (!selected(m)) continue;
      const Usage before = usage_so_far();
      const auto start = std::chrono::steady_clock::now();
      for (int call = 0; call < calls_per_sample; ++call) run(static_cast<Mode>(m));
      result.times[m].push_back(seconds_since(start) / calls_per_sample);
      const Usage after = usage_so_far();
      result.cpu_seconds[m].push_back((after.cpu_seconds - before.cpu_seconds) / calls_per_sample);
      result.page_faults[m].push_back(static_cast<double>(after.page_faults - before.page_faults) / calls_per_sample);
      // The files' writeback, untimed, so that it lands on no other mode's sample; its time
      // is reported with (e).
      const auto sync_start = std::chrono::steady_clock::now();
      sync_filesystem(args.out);
      result.sync_seconds[m].push_back(seconds_since(sync_start));
    }
  }
  if (fs::exists(files_dir)) result.files_bytes = bytes_under(files_dir);
  // Peak RSS, outside the timed runs: reset the high-water mark, run once, read it.
  for (const Mode mode : {kPlain, kDebugRepr, kDebugFiles, kSentinel}) {
    if (!selected(mode)) continue;
    ::malloc_trim(0);
    if (!reset_peak_rss()) break;
    result.rss_before_mib[mode] = status_mib("VmRSS");
    run(mode);
    result.peak_rss_mib[mode] = status_mib("VmHWM");
  }
}

/// Between tiny and seed004: hidden 512, 8 layers, random weights.
llama::LlamaConfig mid_config() {
  llama::LlamaConfig mid;
  mid.vocab_size = 8000;
  mid.hidden_size = 512;
  mid.intermediate_size = 1376;
  mid.num_hidden_layers = 8;
  mid.num_attention_heads = 8;
  mid.num_key_value_heads = 8;
  return mid;
}

/// How far apart two tensors that the plain and annotated models computed are: 0 where they are
/// equal, as they should be. A difference at float rounding is let through (the caller warns
/// once): with OpenBLAS's AVX-512 kernels, chosen by CPU, the two models' products can round
/// apart, which `OPENBLAS_CORETYPE=Haswell` removes (docs/porting.md). A larger one, or
/// other shapes, is an error naming `what`.
double difference(const std::string& what, const torch::Tensor& plain, const torch::Tensor& annotated) {
  if (plain.sizes() != annotated.sizes()) throw std::runtime_error(what + " have different shapes");
  if (torch::equal(plain, annotated)) return 0;
  const double largest = (plain - annotated).abs().max().item<double>();
  const double scale = plain.abs().max().item<double>();
  if (!(largest <= 1e-5 * std::max(scale, 1.0))) {
    std::ostringstream message;
    message << what << " differ by up to " << std::setprecision(3) << largest << " (largest value " << scale << ")";
    throw std::runtime_error(message.str());
  }
  return largest;
}

void warn_if_rounded(const std::string& what, double largest) {
  if (largest == 0) return;
  std::ostringstream line;  // not std::cerr's own precision: it stays set
  line << "warning: " << what << " differ by up to " << std::setprecision(3) << largest << ", float rounding; timed anyway"
       << (std::getenv("OPENBLAS_CORETYPE") == nullptr
               ? " (OPENBLAS_CORETYPE=Haswell makes them equal where OpenBLAS picked AVX-512 kernels)"
               : "")
       << "\n";
  std::cerr << line.str();
}

Result run_config(const NamedConfig& named, const Args& args) {
  torch::NoGradGuard no_grad;  // inference, as the debugger runs it
  std::cerr << "[" << named.name << "] building models\n";
  torch::manual_seed(0);
  llama::LlamaModel model(named.config);
  if (!named.weights.empty()) llama::load_state_dict(*model, named.weights);
  plain_llama::Model plain(plain_config(named.config));
  share_weights(*model, *plain);
  torch::manual_seed(1);
  const auto input_ids = torch::randint(named.config.vocab_size, {args.batch, args.seq}, torch::kLong);

  const auto plain_out = plain->forward(input_ids);
  const auto annotated_out = model({.input_ids = input_ids}).last_hidden_state;
  const std::string outputs = named.name + ": the plain and annotated models' outputs";
  warn_if_rounded(outputs, difference(outputs, plain_out, annotated_out));
  if (!args.export_dir.empty()) {
    bench_export::write_bundle(args.export_dir / named.name, named.config, *model, input_ids, annotated_out);
    return {};
  }
  // (g) must return what (c) returns, or comparing them says nothing.
  {
    std::vector<torch::Tensor> hidden, attentions;
    (void)plain->forward_collecting(input_ids, hidden, attentions);
    const auto captured = model({.input_ids = input_ids}, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
    const std::string collected = named.name + ": the tensors collected by hand and by capture";
    double largest = 0;
    const auto compare = [&](const char* what, const std::vector<torch::Tensor>& by_hand, const std::vector<torch::Tensor>& by_capture) {
      if (by_hand.size() != by_capture.size()) {
        throw std::runtime_error(named.name + ": collecting by hand gives " + std::to_string(by_hand.size()) + " " + what +
                                 ", capture " + std::to_string(by_capture.size()));
      }
      for (std::size_t i = 0; i < by_hand.size(); ++i) {
        largest = std::max(largest, difference(collected + " (" + what + "[" + std::to_string(i) + "])", by_hand[i], by_capture[i]));
      }
    };
    compare("hidden_states", hidden, captured.hidden_states.value());
    compare("attentions", attentions, captured.attentions.value());
    warn_if_rounded(collected, largest);
  }

  const fs::path repr_dir = args.out / (named.name + "_repr");
  const fs::path files_dir = args.out / (named.name + "_safetensors");
  fs::remove_all(repr_dir);
  fs::remove_all(files_dir);
  Result result;
  const auto run = [&](Mode mode) {
    switch (mode) {
      case kPlain:
      case kPlainAgain: (void)plain->forward(input_ids); break;
      case kPlainCollecting: {
        std::vector<torch::Tensor> hidden, attentions;
        (void)plain->forward_collecting(input_ids, hidden, attentions);
        break;
      }
      case kAnnotated: (void)model({.input_ids = input_ids}); break;
      case kCapture: {
        const auto out = model({.input_ids = input_ids}, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
        if (!out.hidden_states || out.hidden_states->size() != static_cast<std::size_t>(named.config.num_hidden_layers + 1) ||
            !out.attentions || out.attentions->size() != static_cast<std::size_t>(named.config.num_hidden_layers)) {
          throw std::runtime_error(named.name + ": capture returned the wrong number of tensors");
        }
        break;
      }
      case kDebugRepr: {
        auto guard = tracetorch::model_addition_debugger(model, {.debug_path = repr_dir, .do_prune_layers = args.prune_layers, .use_repr = true,
                                                                  .reuse_repeated_tensors = args.reuse_repeated_tensors});
        (void)model({.input_ids = input_ids});
        break;
      }
      case kDebugFiles: {
        auto guard = tracetorch::model_addition_debugger(model, {.debug_path = files_dir, .do_prune_layers = args.prune_layers, .use_repr = false,
                                                                  .reuse_repeated_tensors = args.reuse_repeated_tensors,
                                                                  .reuse_previous_files = args.reuse_previous_files});
        (void)model({.input_ids = input_ids});
        break;
      }
      case kSentinel: {
        auto sentinel = tracetorch::find_nonfinite(model);
        (void)model({.input_ids = input_ids});
        if (sentinel.first()) throw std::runtime_error(named.name + ": the sentinel found " + sentinel.first()->message());
        break;
      }
      case kModes: break;
    }
  };
  time_modes(named.name, args, run, files_dir, result);
  if (args.post_costs) {
    result.costs = bench_costs::costs_table(named.name, std::to_string(args.batch) + " x " + std::to_string(args.seq), model,
                                            repr_dir, files_dir);
  }
  return result;
}

#ifdef TRACETORCH_BENCH_MOE
/// --config moe: the Qwen2-MoE port (examples/qwen2_moe) on its fixture's config and weights and
/// random ids of --batch x --seq. No plain LibTorch MoE exists, so (a) is the annotated model
/// untraced; (b) and (g) do not apply.
Result run_moe(const fs::path& bundle, Args args) {
  torch::NoGradGuard no_grad;
  std::cerr << "[moe] building the model\n";
  auto config = qwen2_moe::Qwen2MoeConfig::from_json_file(bundle / "config.json");
  config.max_position_embeddings = std::max(config.max_position_embeddings, args.seq);
  qwen2_moe::Qwen2MoeModel model(config);
  qwen2_moe::load_state_dict(*model, bundle / "model.safetensors");
  torch::manual_seed(1);
  const auto input_ids = torch::randint(config.vocab_size, {args.batch, args.seq}, torch::kLong);
  if (!args.export_dir.empty()) {
    bench_export::write_moe_bundle(args.export_dir / "moe", bundle, input_ids, model({.input_ids = input_ids}).last_hidden_state);
    return {};
  }
  std::erase_if(args.modes, [](char mode) { return mode == 'b' || mode == 'g'; });
  const auto sparse_layers = config.num_hidden_layers - static_cast<std::int64_t>(config.mlp_only_layers.size());
  const fs::path repr_dir = args.out / "moe_repr", files_dir = args.out / "moe_safetensors";
  fs::remove_all(repr_dir);
  fs::remove_all(files_dir);
  Result result;
  result.mode_names = kMoeModeNames;
  const auto run = [&](Mode mode) {
    switch (mode) {
      case kCapture: {
        const auto out = model({.input_ids = input_ids}, tracetorch::output_options({{"output_hidden_states", true},
                                                                                      {"output_attentions", true},
                                                                                      {"output_router_logits", true}}));
        if (!out.router_logits || static_cast<std::int64_t>(out.router_logits->size()) != sparse_layers || !out.hidden_states ||
            !out.attentions) {
          throw std::runtime_error("moe: capture returned the wrong number of tensors");
        }
        break;
      }
      case kDebugRepr: {
        auto guard = tracetorch::model_addition_debugger(model, {.debug_path = repr_dir, .do_prune_layers = args.prune_layers, .use_repr = true});
        (void)model({.input_ids = input_ids});
        break;
      }
      case kDebugFiles: {
        auto guard = tracetorch::model_addition_debugger(model, {.debug_path = files_dir, .do_prune_layers = args.prune_layers, .use_repr = false});
        (void)model({.input_ids = input_ids});
        break;
      }
      case kSentinel: {
        auto sentinel = tracetorch::find_nonfinite(model);
        (void)model({.input_ids = input_ids});
        if (sentinel.first()) throw std::runtime_error("moe: the sentinel found " + sentinel.first()->message());
        break;
      }
      default: (void)model({.input_ids = input_ids}); break;  // (a), (f)
    }
  };
  time_modes("moe", args, run, files_dir, result);
  return result;
}
#endif

std::string cpu_model() {
  std::istringstream in(read_text("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

#ifdef TRACETORCH_BENCH_TP
/// --world-size N, in one rank: the tensor-parallel Llama (examples/llama_tp) of the config, with
/// random weights, untraced (a) and traced by every rank (d), (e) into --out/ranks<N>_*/rank_<r>.
/// One call per sample and the same seeded order on every rank: each call all-reduces, so every
/// rank must make the same calls. Writes its medians to --out/ranks<N>/rank_<r>.txt.
void run_rank(const NamedConfig& named, Args args, const tracetorch::nn::TensorParallel& tp) {
  torch::NoGradGuard no_grad;
  tracetorch::nn::process_tensor_parallel() = tp;
  llama_tp::LlamaConfig config;
  static_cast<llama::LlamaConfig&>(config) = named.config;
  config.parallel = tp;
  torch::manual_seed(0);
  llama_tp::LlamaModel model(config);
  torch::manual_seed(1);  // the same ids on every rank
  const auto input_ids = torch::randint(named.config.vocab_size, {args.batch, args.seq}, torch::kLong);
  const std::string tag = "ranks" + std::to_string(tp.world_size), rank = "rank_" + std::to_string(tp.rank);
  const fs::path repr_dir = args.out / (tag + "_repr") / rank, files_dir = args.out / (tag + "_safetensors") / rank;
  std::erase_if(args.modes, [](char mode) { return mode != 'd' && mode != 'e'; });
  const auto run = [&](Mode mode) {
    if (mode == kDebugRepr || mode == kDebugFiles) {
      auto guard = tracetorch::model_addition_debugger(
          model, {.debug_path = mode == kDebugRepr ? repr_dir : files_dir, .do_prune_layers = args.prune_layers,
                  .use_repr = mode == kDebugRepr, .rank = 0});  // every rank records, into its own directory
      (void)model({.input_ids = input_ids});
    } else {
      (void)model({.input_ids = input_ids});
    }
  };
  Result result;
  time_modes(named.name + " " + rank, args, run, files_dir, result, 1);
  fs::create_directories(args.out / tag);
  std::ofstream out(args.out / tag / (rank + ".txt"));
  out << std::setprecision(9);
  for (const Mode mode : {kPlain, kDebugRepr, kDebugFiles}) {
    if (!result.times[mode].empty()) out << static_cast<int>(mode) << " " << median(result.times[mode]) << "\n";
  }
  out << "bytes " << result.files_bytes.all << "\n";
}

/// The ranks' medians: one row per mode, the slowest rank's median, its ratio to the slowest
/// rank's (a), and the bytes all ranks wrote.
void report_ranks(const Args& args) {
  const fs::path dir = args.out / ("ranks" + std::to_string(args.world_size));
  double slowest[kModes] = {};
  double bytes = 0;
  for (int rank = 0; rank < args.world_size; ++rank) {
    std::istringstream in(read_text(dir / ("rank_" + std::to_string(rank) + ".txt")));
    std::string key;
    double value = 0;
    while (in >> key >> value) {
      if (key == "bytes") {
        bytes += value;
      } else {
        slowest[std::stoi(key)] = std::max(slowest[std::stoi(key)], value);
      }
    }
  }
  std::cout << "tracetorch_bench --world-size " << args.world_size << ": " << cpu_model() << ", "
            << ::sysconf(_SC_NPROCESSORS_ONLN) << " CPUs online, batch " << args.batch << " x seq " << args.seq
            << ", --repeats " << args.repeats << ", load average " << load_average() << "\n\n";
  std::cout << "| config | ranks | mode | median s (slowest rank) | ratio to (a) | notes |\n| --- | --- | --- | --- | --- | --- |\n";
  const std::map<int, std::string> names = {{kPlain, "(a) tensor-parallel Llama, no trace"},
                                            {kDebugRepr, "(d) debugger use_repr=true, every rank"},
                                            {kDebugFiles, "(e) debugger use_repr=false, every rank"}};
  for (const auto& [mode, name] : names) {
    if (slowest[mode] <= 0) continue;
    std::cout << "| " << args.config << " | " << args.world_size << " | " << name << " | " << std::setprecision(4)
              << slowest[mode] << " | " << std::setprecision(3) << slowest[mode] / slowest[kPlain] << " | ";
    if (mode == kDebugFiles) std::cout << std::fixed << std::setprecision(1) << bytes / 1e6 << std::defaultfloat << " MB of files, all ranks";
    std::cout << " |\n";
  }
}

/// --world-size N: a rank (RANK and WORLD_SIZE set) runs run_rank; otherwise this process starts
/// N ranks (tracetorch/distributed.hpp's launcher, a TCPStore on loopback), or is the one rank,
/// and prints the report.
int bench_ranks(const Args& args, int argc, char** argv) {
  if (args.config != "tiny" && args.config != "mid" && args.config != "seed004") usage("--world-size takes --config tiny, mid or seed004");
  const auto environment = tracetorch::detail::rank_environment();
  if (!environment && args.world_size > 1) {
    const std::vector<std::string> arguments(argv, argv + argc);  // argv[0] included, as the launcher passes it on
    const int status = tracetorch::detail::launch_ranks("tracetorch_bench", "/proc/self/exe", arguments, args.world_size,
                                                        std::chrono::seconds(10));
    if (status == 0) report_ranks(args);
    return status;
  }
  NamedConfig named{args.config, llama::LlamaConfig{}, {}};
  if (args.config == "tiny") named.config = llama::LlamaConfig::from_json_file(args.tiny_config);
  if (args.config == "mid") named.config = mid_config();
  named.config.max_position_embeddings = std::max(named.config.max_position_embeddings, args.seq);
  run_rank(named, args, tracetorch::join_process_group_from_environment());
  if (!environment) report_ranks(args);
  return 0;
}
#endif

/// The targets against this run's figures, one line each.
void print_targets(const std::vector<std::pair<std::string, Result>>& results, double disk_mbps) {
  struct Target {
    std::string config;
    Mode mode;
    double at_most;
  };
  // Issue 37's targets (docs/performance.md).
  const Target targets[] = {{"tiny", kAnnotated, 1.01},    {"seed004", kAnnotated, 1.01}, {"seed004", kCapture, 1.05},
                            {"seed004", kDebugRepr, 1.05}, {"seed004", kDebugFiles, 1.10}, {"tiny", kDebugRepr, 1.5},
                            {"tiny", kDebugFiles, 2.5}};
  std::cout << "\ntargets (ratio of medians to (a) in this run):\n";
  const auto verdict = [](bool met) { return met ? "met" : "MISSED"; };
  for (const auto& target : targets) {
    for (const auto& [name, result] : results) {
      if (name != target.config || result.times[target.mode].empty()) continue;
      const double ratio = median(result.times[target.mode]) / median(result.times[kPlain]);
      std::cout << "  " << std::left << std::setw(8) << name << std::setw(38) << kModeNames[target.mode] << std::right
                << " <= " << std::setprecision(2) << target.at_most << ": " << std::setprecision(3) << ratio << "  "
                << verdict(ratio <= target.at_most) << "\n";
    }
  }
  for (const auto& [name, result] : results) {
    if (result.times[kPlainCollecting].empty() || result.times[kCapture].empty()) continue;
    std::cout << "  " << std::left << std::setw(8) << name << std::setw(38) << "capture's own cost: (c) over (g)" << std::right
              << "         " << std::setprecision(3)
              << median(result.times[kCapture]) / median(result.times[kPlainCollecting]) << "  ((g) over (a): "
              << median(result.times[kPlainCollecting]) / median(result.times[kPlain]) << ")\n";
  }
  for (const auto& [name, result] : results) {
    if (result.times[kPlainAgain].empty()) continue;
    std::cout << "  " << std::left << std::setw(8) << name << std::setw(38) << "noise floor: (f), the plain model again"
              << std::right << "         " << std::setprecision(3)
              << median(result.times[kPlainAgain]) / median(result.times[kPlain]) << "\n";
  }
  for (const auto& [name, result] : results) {
    if (name != "seed004" || result.times[kDebugFiles].empty() || disk_mbps <= 0) continue;
    const auto rates = write_rates(result);
    std::cout << "  " << std::left << std::setw(8) << name << std::setw(38) << "(e) writing, over the time tracing adds"
              << std::right << " >= 50% of disk: " << std::setprecision(0) << 100.0 * rates.over_added / disk_mbps << "%  "
              << verdict(rates.over_added >= 0.5 * disk_mbps) << " (over the whole forward: "
              << 100.0 * rates.over_forward / disk_mbps << "%)\n";
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse_args(argc, argv);
  fs::create_directories(args.out);
  if (args.world_size > 0) {
#ifdef TRACETORCH_BENCH_TP
    return bench_ranks(args, argc, argv);
#else
    usage("--world-size needs the tensor-parallel Llama (TRACETORCH_WITH_C10D and TRACETORCH_BUILD_PORTS)");
#endif
  }
  std::vector<NamedConfig> configs;
  if (args.config == "tiny" || args.config == "both") {
    NamedConfig tiny{"tiny", llama::LlamaConfig::from_json_file(args.tiny_config), {}};
    const auto weights = args.tiny_config.parent_path() / "model.safetensors";
    if (fs::exists(weights)) tiny.weights = weights;
    configs.push_back(tiny);
  }
  if (args.config == "mid") configs.push_back({"mid", mid_config(), {}});
  if (args.config == "seed004" || args.config == "both") configs.push_back({"seed004", llama::LlamaConfig{}, {}});
  for (auto& named : configs) {  // rotary positions are computed, not tabled: a longer input only needs the config to say so
    named.config.max_position_embeddings = std::max(named.config.max_position_embeddings, args.seq);
  }

  const std::string load_start = load_average();
  std::cerr << "measuring the disk's sequential write speed (" << args.disk_mb << " MiB, fsync, median of 3)\n";
  // One measurement moved between 350 and 880 MB/s from run to run on the shared VM.
  double disk_mbps = 0.0;
  if (args.disk_mb > 0) {
    std::vector<double> speeds;
    for (int i = 0; i < 3; ++i) speeds.push_back(disk_write_speed(args.out, args.disk_mb));
    disk_mbps = median(speeds);
  }
  std::vector<std::pair<std::string, Result>> results;
  for (const auto& named : configs) results.emplace_back(named.name, run_config(named, args));
  if (args.config == "moe") {
#ifdef TRACETORCH_BENCH_MOE
    results.emplace_back("moe", run_moe(TRACETORCH_BENCH_MOE, args));
#else
    usage("--config moe needs the Qwen2-MoE port (configure with TRACETORCH_BUILD_PORTS=ON)");
#endif
  }
  if (!args.export_dir.empty()) return 0;
  if (!args.samples.empty()) {
    for (const auto& [name, result] : results) {
      for (int m = 0; m < kModes; ++m) {
        if (!result.times[m].empty()) bench_export::append_samples(args.samples, name, static_cast<char>('a' + m), result.times[m]);
      }
    }
  }
  const std::string load_end = load_average();

  std::cout << "tracetorch_bench: " << cpu_model() << ", " << ::sysconf(_SC_NPROCESSORS_ONLN) << " CPUs online, "
            << "torch threads " << torch::get_num_threads() << " (interop " << torch::get_num_interop_threads() << "), "
            << "--repeats " << args.repeats << " (five times that for a forward under 50 ms), batch " << args.batch
            << " x seq " << args.seq << "\n";
  std::cout << "load average (1/5/15 min): " << load_start << " at start, " << load_end << " at end\n";
  std::cout << "disk sequential write (" << args.disk_mb << " MiB + fsync, median of 3, " << fs::absolute(args.out).string()
            << "): " << std::fixed << std::setprecision(0) << disk_mbps << " MB/s\n\n";
  std::cout << "| config | mode | median s | min s | ratio to (a) | notes |\n";
  std::cout << "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& [name, result] : results) {
    const double baseline = median(result.times[kPlain]);
    for (int m = 0; m < kModes; ++m) {
      if (result.times[m].empty()) continue;
      const double med = median(result.times[m]);
      std::ostringstream notes;
      notes << std::fixed << std::setprecision(0);
      if (m == kPlain) {
        notes << result.repeats << " repeats";
        if (result.calls_per_sample > 1) notes << " of " << result.calls_per_sample << " calls";
        notes << "; ";
      }
      if (m == kDebugFiles) {
        const double all_mb = static_cast<double>(result.files_bytes.all) / 1e6;
        const double written_mb = static_cast<double>(result.files_bytes.distinct) / 1e6;
        const auto rates = write_rates(result);
        notes << std::setprecision(1) << all_mb << " MB of files, " << written_mb << " MB written (the rest hard links); "
              << std::setprecision(0) << rates.over_forward << " MB/s over the whole forward";
        if (disk_mbps > 0) notes << " (" << 100.0 * rates.over_forward / disk_mbps << "% of disk)";
        notes << ", " << rates.over_added << " MB/s over the time tracing adds";
        if (disk_mbps > 0) notes << " (" << 100.0 * rates.over_added / disk_mbps << "% of disk)";
        notes << "; untimed syncfs after each sample " << std::setprecision(2) << median(result.sync_seconds[m]) << " s; ";
      }
      notes << median(result.page_faults[m]) << " page faults, " << std::setprecision(3) << median(result.cpu_seconds[m])
            << " CPU s; " << std::setprecision(0);
      if (result.peak_rss_mib[m] > 0) {
        notes << "peak RSS " << result.peak_rss_mib[m] << " MiB (+" << result.peak_rss_mib[m] - result.rss_before_mib[m]
              << " over the model)";
      }
      std::cout << "| " << name << " | " << result.mode_names[m] << " | " << std::setprecision(4) << med << " | "
                << *std::min_element(result.times[m].begin(), result.times[m].end()) << " | " << std::setprecision(3)
                << med / baseline << " | " << notes.str() << " |\n";
    }
  }
  print_targets(results, disk_mbps);
  for (const auto& [name, result] : results) std::cout << result.costs;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "tracetorch_bench: " << e.what() << "\n";
  return 1;
}
