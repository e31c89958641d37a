// tracetorch-diff: where does a port first diverge from its reference? Compares two traces of
// the model addition debugger (tracetorch's or transformers') module by module.
//
//   tracetorch-diff REF CANDIDATE [--atol 1e-5] [--rtol 1e-4] [--map 'REGEX=>REPLACEMENT']... [--accept RULES]...
//                   [--arg-names RULES]... [--no-precision-tolerance] [--json REPORT] [--html REPORT.html] [--all]
//                   [--merge-ranks]
//
// Exit status: 0 all within tolerance (or every difference accepted by a rule), 1 something
// diverges, 2 unreadable or malformed input (a trace, a rules file) or a bad command line.

#include <tracetorch/diff.hpp>
#include <tracetorch/html_report.hpp>
#include <tracetorch/rank_traces.hpp>

#include "command_line.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: tracetorch-diff REF CANDIDATE [--atol 1e-5] [--rtol 1e-4] [--map 'REGEX=>REPLACEMENT']...\n"
    "                       [--accept RULES]... [--arg-names RULES]... [--no-precision-tolerance]\n"
    "                       [--json REPORT] [--html REPORT.html] [--all] [--merge-ranks]\n"
    "\n"
    "Compares two model addition debugger traces (directories holding <Root>_debug_tree_FULL_TENSORS.json,\n"
    "or those files) module by module and names the first divergence.\n"
    "  --atol, --rtol  tolerance: |candidate - reference| <= atol + rtol * |reference| (default 1e-5, 1e-4)\n"
    "  --map           rename module paths on both sides before alignment (RE2: Python's syntax; $1 for groups); repeatable\n"
    "  --accept RULES  reviewed known differences, one rule a line: PATTERN KIND REASON (# comments);\n"
    "                  PATTERN is MODULE or MODULE:VALUE (globs: * any run, ? one character), KIND one of\n"
    "                  values, non-tensor, shape, structure, dtype, missing-value, missing-call, order\n"
    "                  (order: a call that ran in another order among its parent's calls);\n"
    "                  matching differences are reported as accepted and do not fail; repeatable\n"
    "  --arg-names RULES  which keyword each positional argument is, one rule a line: MODULE NAME,NAME,...\n"
    "                  (# comments; MODULE a glob as above): in those calls inputs.args.N on one side is\n"
    "                  inputs.kwargs.NAME on the other, NAME the N-th (from 0), even against the recorded\n"
    "                  order; repeatable\n"
    "  --no-precision-tolerance  judge bf16/fp16 pairs by --atol/--rtol alone (by default at least twice\n"
    "                  the lower precision's epsilon: bf16 1.5625e-2, fp16 1.953e-3)\n"
    "  --json REPORT   also write the full report as JSON\n"
    "  --html REPORT.html  also write the report as one self-contained HTML page (summary, error plot,\n"
    "                  module tree; docs/reference/html_report.md)\n"
    "  --all           list every compared tensor\n"
    "  --merge-ranks   REF or CANDIDATE is a multi-rank trace (tensor parallelism: rank_<r>/ directories and\n"
    "                  tracetorch_ranks.json; detected without the flag): its ranks are merged into one trace,\n"
    "                  sharded values rebuilt from their shards, replicated values checked equal on every rank;\n"
    "                  a rank that disagrees or whose shard is misplaced or diverges is named (exit 1), a missing\n"
    "                  rank is exit 2; the trace must hold tensor files (traced with --safetensors)\n"
    "Exit status: 0 within tolerance (or every difference accepted), 1 divergence, 2 unreadable or malformed\n"
    "input (a trace or a rules file) or a bad command line.\n";

using tracetorch::command_line::UsageError;

/// "\r[k/N] comparing" on a terminal, at most ten times a second; erased at the end.
class ProgressLine {
 public:
  void operator()(std::size_t done, std::size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::fprintf(stderr, "\rtracetorch-diff: compared %zu of %zu values", done, total);
    std::fflush(stderr);
    shown_ = true;
  }
  ~ProgressLine() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

/// What the command line asks for.
struct CommandLine {
  std::vector<std::string> positional;
  tracetorch::DiffOptions options;
  std::string json_path;
  std::string html_path;
  std::vector<std::string> accept_files;
  std::vector<std::string> arg_names_files;
  bool all = false;
  bool merge_ranks = false;
};

/// Throws UsageError on a command line it cannot use (a bad --map included).
CommandLine parse_command_line(int argc, char** argv) {
  using tracetorch::command_line::parse_number;
  CommandLine command;
  for (tracetorch::command_line::ArgumentReader arg(argc, argv); arg.next();) {
    const std::string& flag = arg.name();
    if (flag == "--atol") {
      command.options.atol = parse_number(flag, arg.value(), 0.0);
    } else if (flag == "--rtol") {
      command.options.rtol = parse_number(flag, arg.value(), 0.0);
    } else if (flag == "--map") {
      try {
        command.options.renames.push_back(tracetorch::PathRename::parse(arg.value()));
      } catch (const tracetorch::Error& e) {
        throw UsageError(e.what());
      }
    } else if (flag == "--accept") {
      command.accept_files.push_back(arg.value());
    } else if (flag == "--arg-names") {
      command.arg_names_files.push_back(arg.value());
    } else if (flag == "--json") {
      command.json_path = arg.value();
    } else if (flag == "--html") {
      command.html_path = arg.value();
    } else if (flag == "--no-precision-tolerance") {
      command.options.precision_tolerance = false;
    } else if (flag == "--all") {
      command.all = true;
    } else if (flag == "--merge-ranks") {
      command.merge_ranks = true;
    } else if (flag.starts_with("--")) {
      throw UsageError("unknown option " + flag);
    } else {
      command.positional.push_back(flag);
    }
  }
  if (command.positional.size() != 2) {
    throw UsageError("expected REF and CANDIDATE, got " + std::to_string(command.positional.size()) + " paths");
  }
  return command;
}

/// The multi-rank traces among REF and CANDIDATE, each merged into a temporary directory (removed
/// at the end), and what the merges found.
class RankMerges {
 public:
  RankMerges(const std::vector<std::string>& paths, bool required) : paths_{paths.at(0), paths.at(1)} {
    for (std::size_t i = 0; i < 2; ++i) {
      if (!tracetorch::is_multi_rank_trace(paths_[i]) && !(required && i == 1)) continue;
      if (temporary_.empty()) {
        std::string pattern = (std::filesystem::temp_directory_path() / "tracetorch-diff-ranks-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw tracetorch::Error("cannot create a temporary directory");
        temporary_ = pattern;
      }
      merged_[i] = tracetorch::merge_rank_traces(paths_[i], temporary_ / (i == 0 ? "reference" : "candidate"));
      paths_[i] = merged_[i]->directory;
    }
  }
  ~RankMerges() {
    std::error_code ec;
    if (!temporary_.empty()) std::filesystem::remove_all(temporary_, ec);
  }
  const std::filesystem::path& path(std::size_t i) const { return paths_[i]; }

  /// Prints each merge's findings (the candidate's also against REF's tensor files); false if any.
  bool report(double atol, double rtol) {
    bool agree = true;
    for (std::size_t i = 0; i < 2; ++i) {
      if (!merged_[i]) continue;
      if (i == 1) {
        std::error_code ec;
        const auto& reference = paths_[0];
        tracetorch::attribute_diverging_shards(*merged_[i], std::filesystem::is_directory(reference, ec) ? reference : reference.parent_path(),
                                               atol, rtol);
      }
      std::cout << (i == 0 ? "REF " : "CANDIDATE ") << tracetorch::rank_findings_text(*merged_[i]);
      agree = agree && merged_[i]->findings.empty();
    }
    return agree;
  }

 private:
  std::filesystem::path paths_[2];
  std::filesystem::path temporary_;
  std::optional<tracetorch::MergedRankTrace> merged_[2];
};

/// Reads the rules, compares, prints the report (and writes the JSON one): the exit status.
int run(CommandLine& command) {
  auto& options = command.options;
  try {
    for (const auto& file : command.accept_files) {
      auto rules = tracetorch::load_accept_rules(file);  // a malformed file: Error "FILE:LINE: ...", exit 2
      options.accept.insert(options.accept.end(), rules.begin(), rules.end());
    }
    for (const auto& file : command.arg_names_files) {
      auto rules = tracetorch::load_arg_names_rules(file);  // the same: "FILE:LINE: ...", exit 2
      options.arg_names.insert(options.arg_names.end(), rules.begin(), rules.end());
    }
    std::optional<ProgressLine> progress;
    if (::isatty(STDERR_FILENO)) {
      progress.emplace();
      options.progress = [&progress](std::size_t done, std::size_t total) { (*progress)(done, total); };
    }
    RankMerges merges(command.positional, command.merge_ranks);
    const auto report = tracetorch::diff_traces(merges.path(0), merges.path(1), options);
    progress.reset();
    std::cout << report.text(command.all) << std::flush;
    const bool ranks_agree = merges.report(options.atol, options.rtol);
    if (!command.json_path.empty()) tracetorch::write_diff_report(report, command.json_path);
    if (!command.html_path.empty()) tracetorch::write_html_report(command.html_path, report.json());
    return report.within_tolerance() && ranks_agree ? 0 : 1;
  } catch (const tracetorch::Error& e) {
    std::cerr << "tracetorch-diff: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {  // c10::Error and the like: still input the tool could not use
    std::cerr << "tracetorch-diff: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return tracetorch::command_line::run_program("tracetorch-diff", kUsage, argc, argv, parse_command_line, run);
}
