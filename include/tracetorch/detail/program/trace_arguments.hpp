#pragma once
/// \file
/// The command line of a trace program (tracetorch/trace_program.hpp): its flags, read into
/// TraceArguments, and its usage text. Nothing here knows the port's types.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/program/command_line.hpp"

namespace tracetorch::detail {

/// A trace program's command line, as read; the port's types check --call and --inputs later.
struct TraceArguments {
  std::optional<std::filesystem::path> config, weights, input_ids, inputs;
  std::int64_t batch = 4, seq = 30;
  std::uint64_t seed = 673;
  std::filesystem::path debug_path;
  bool prune_layers = true;
  bool use_repr = true;
  bool shared_call_files = false;
  bool output_hidden_states = false;
  bool output_attentions = false;
  std::optional<std::filesystem::path> dump_captured;
  /// --call KEY=VALUE, in the order given: (key, the Python literal's text).
  std::vector<std::pair<std::string, std::string>> calls;
  /// --set KEY=VALUE, config fields set after --config is read, in the order given.
  std::vector<std::pair<std::string, std::string>> config_fields;
  bool find_nonfinite = false;
  std::optional<std::filesystem::path> replay, replay_json, replay_html, replay_accept;
  /// Not a flag: the rank the debugger records as (a tensor-parallel rank records as its own
  /// rank 0); unset, the debugger's rule ($RANK).
  std::optional<int> debugger_rank;
};

/// The usage text of program `program` tracing `root` (a registered name, "LlamaModel"); `about`
/// says which port it is, `config_default` what runs without --config.
inline std::string trace_usage(std::string_view program, std::string_view root, std::string_view about,
                               std::string_view config_default) {
  const std::string p(program), pad(program.size(), ' ');
  std::string text =
      "usage: " + p + " [--config config.json] [--weights CHECKPOINT] [--input-ids input_ids.safetensors]\n" +
      "       " + pad + " [--set KEY=VALUE]... [--inputs inputs.safetensors] [--call KEY=VALUE]...\n" +
      "       " + pad + " [--batch B] [--seq S] [--seed N]\n" +
      "       " + pad + " --debug-path DIR [--no-prune-layers] [--safetensors] [--shared-call-files] [--find-nonfinite]\n" +
      "       " + pad + " [--output-hidden-states] [--output-attentions] [--dump-captured DIR]\n" +
      "       " + p + " [--config ...] [--weights ...] --replay REF_TRACE_DIR [--json REPORT.json] [--html REPORT.html]\n\n";
  text += "Runs " + std::string(about) + " under tracetorch's model addition debugger\nand writes DIR/" + std::string(root) +
          "_debug_tree_SUMMARY.json and _FULL_TENSORS.json.\n";
  text += "  --config           transformers config JSON (default: " + std::string(config_default) + ")\n";
  text +=
      "  --set KEY=VALUE    a config field as a Python literal, set after --config (num_hidden_layers=2,\n"
      "                     vision_config.hidden_size=32, rope_scaling=None); repeatable\n";
  text +=
      "  --weights          transformers checkpoint: model.safetensors, a sharded index .json, or their\n"
      "                     folder (default: seeded random init)\n"
      "  --input-ids        safetensors file holding an int64 [batch, seq] tensor \"input_ids\" (default: random)\n"
      "  --inputs           safetensors file: each tensor passed to the call as the keyword of its name\n"
      "  --call KEY=VALUE   a keyword of the call as a Python literal (use_cache=False); repeatable\n"
      "  --batch, --seq     shape of the random input ids (default 4 x 30)\n"
      "  --seed             random seed (default 673)\n"
      "  --no-prune-layers  keep every layer (default: only the first and last layer block)\n"
      "  --safetensors      one .safetensors file per tensor instead of printed values (use_repr=False)\n"
      "  --shared-call-files  with --safetensors: a module called again writes its files under the first\n"
      "                     call's names, as transformers' debugger does (default: _call<N> names)\n"
      "  --output-hidden-states, --output-attentions\n"
      "                     capture them (output_hidden_states=True / output_attentions=True)\n"
      "  --dump-captured    write each captured output field to DIR/<field>_<i>.safetensors (key \"data\";\n"
      "                     hidden_states_0, attentions_0, router_logits_0, image_hidden_states_0, ...)\n"
      "  --find-nonfinite   name the first module call whose outputs hold NaN or Inf (exit 3)\n"
      "  --replay           run every module call on the inputs a use_repr=False reference trace recorded\n"
      "                     and compare its outputs (docs/reference/replay.md); exit 1 when one diverges\n"
      "  --accept           with --replay: reviewed known differences, tracetorch-diff's accept rules file\n"
      "  --json             with --replay: write the report as JSON\n"
      "  --html             with --replay: write the report as one self-contained HTML page\n";
  return text;
}

/// "KEY=VALUE" of --call and --set; UsageError without the `=` or the key.
inline std::pair<std::string, std::string> split_call_argument(const std::string& flag, const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw command_line::UsageError(flag + " needs KEY=VALUE (" + (flag == "--set" ? "a config field" : "a keyword") +
                                   " and a Python literal), got '" + text + "'");
  }
  return {text.substr(0, equals), text.substr(equals + 1)};
}

/// The flags that name a file or directory; an empty value is a UsageError.
inline constexpr std::pair<std::string_view, std::optional<std::filesystem::path> TraceArguments::*> kPathFlags[] = {
    {"--config", &TraceArguments::config},
    {"--weights", &TraceArguments::weights},
    {"--input-ids", &TraceArguments::input_ids},
    {"--inputs", &TraceArguments::inputs},
    {"--dump-captured", &TraceArguments::dump_captured},
    {"--replay", &TraceArguments::replay},
    {"--accept", &TraceArguments::replay_accept},
    {"--json", &TraceArguments::replay_json},
    {"--html", &TraceArguments::replay_html},
};

/// The flags without a value, each setting its member to the value it names.
struct SwitchFlag {
  std::string_view flag;
  bool TraceArguments::*member;
  bool value;
};
inline constexpr SwitchFlag kSwitchFlags[] = {
    {"--no-prune-layers", &TraceArguments::prune_layers, false},
    {"--safetensors", &TraceArguments::use_repr, false},
    {"--shared-call-files", &TraceArguments::shared_call_files, true},
    {"--output-hidden-states", &TraceArguments::output_hidden_states, true},
    {"--output-attentions", &TraceArguments::output_attentions, true},
    {"--find-nonfinite", &TraceArguments::find_nonfinite, true},
};

/// Reads one flag into `args`; false when `flag` is not a trace program's flag.
inline bool read_trace_flag(command_line::ArgumentReader& arg, TraceArguments& args, bool& have_debug_path) {
  using command_line::parse_number;
  const std::string& flag = arg.name();
  for (const auto& [name, member] : kPathFlags) {
    if (flag != name) continue;
    const std::string value = arg.value();
    if (value.empty()) throw command_line::UsageError(flag + " needs a path, got ''");
    args.*member = value;
    return true;
  }
  for (const auto& [name, member, value] : kSwitchFlags) {
    if (flag != name) continue;
    args.*member = value;
    return true;
  }
  if (flag == "--call") {
    args.calls.push_back(split_call_argument(flag, arg.value()));
  } else if (flag == "--set") {
    args.config_fields.push_back(split_call_argument(flag, arg.value()));
  } else if (flag == "--batch") {
    args.batch = parse_number<std::int64_t>(flag, arg.value(), 1);
  } else if (flag == "--seq") {
    args.seq = parse_number<std::int64_t>(flag, arg.value(), 1);
  } else if (flag == "--seed") {
    args.seed = parse_number<std::uint64_t>(flag, arg.value(), 0);
  } else if (flag == "--debug-path") {
    args.debug_path = arg.value();
    have_debug_path = true;
  } else {
    return false;
  }
  return true;
}

/// The whole command line; UsageError for an unknown flag or a missing or contradictory one.
inline TraceArguments parse_trace_arguments(int argc, char** argv) {
  TraceArguments args;
  bool have_debug_path = false;
  for (command_line::ArgumentReader arg(argc, argv); arg.next();) {
    if (!read_trace_flag(arg, args, have_debug_path)) throw command_line::UsageError("unknown argument '" + arg.name() + "'");
  }
  if (args.replay_json && !args.replay) throw command_line::UsageError("--json needs --replay");
  if (args.replay_html && !args.replay) throw command_line::UsageError("--html needs --replay");
  if (args.replay_accept && !args.replay) throw command_line::UsageError("--accept needs --replay");
  if (!args.replay && !args.find_nonfinite && (!have_debug_path || args.debug_path.empty())) throw command_line::UsageError("--debug-path DIR is required (unless --replay or --find-nonfinite)");
  if (args.shared_call_files && args.use_repr) throw command_line::UsageError("--shared-call-files needs --safetensors");
  const bool captures_a_key = std::any_of(args.calls.begin(), args.calls.end(), [](const auto& call) {
    return call.first.starts_with("output_") && call.second == "True";
  });
  if (args.dump_captured && !args.output_hidden_states && !args.output_attentions && !captures_a_key) {
    throw command_line::UsageError("--dump-captured needs --output-hidden-states, --output-attentions or --call output_<key>=True");
  }
  return args;
}

}  // namespace tracetorch::detail
