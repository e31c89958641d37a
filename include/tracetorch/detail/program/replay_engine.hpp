#pragma once
/// \file
/// Module replay (tracetorch/replay.hpp): every call a use_repr=False reference trace recorded is
/// run again on the port's module of that path, on the reference's own inputs, and judged in
/// isolation; innermost diverging calls first.

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/attachments.hpp"
#include "tracetorch/detail/program/exception_message.hpp"
#include "tracetorch/detail/program/replay_compare.hpp"
#include "tracetorch/detail/program/replay_observer.hpp"
#include "tracetorch/replay/types.hpp"
#include "tracetorch/detail/trace_format/reader.hpp"
#include "tracetorch/detail/trace_format/tensor_files.hpp"

namespace tracetorch::detail {

/// The reference trace, read under its directory's lock, with the root's outputs from their files.
inline Trace read_replay_reference(const std::filesystem::path& path) {
  const auto lock = lock_trace_for_reading(path);
  Trace trace = parse_trace_file(resolve_trace_path(path));
  if (trace.printed_tensors > 0 || trace.calls.empty()) {
    throw Error("tracetorch: " + trace.json_file.string() +
                ": replay needs a trace with tensor files (use_repr=False, --safetensors), not printed values");
  }
  add_root_outputs(trace, root_output_files(trace));
  return trace;
}

/// For each call, a tensor file it shares with a later call (Python's debugger names a repeated
/// call's files alike, so only the last call's values survive); empty where none.
inline std::vector<std::string> overwritten_files(const Trace& trace) {
  std::map<std::string, std::size_t> last_user;
  for (std::size_t i = 0; i < trace.calls.size(); ++i) {
    for (const auto* slots : {&trace.calls[i].inputs, &trace.calls[i].outputs}) {
      for (const auto& slot : *slots) {
        if (!slot.file.empty()) last_user[slot.file] = i;
      }
    }
  }
  std::vector<std::string> out(trace.calls.size());
  for (std::size_t i = 0; i < trace.calls.size(); ++i) {
    for (const auto* slots : {&trace.calls[i].inputs, &trace.calls[i].outputs}) {
      for (const auto& slot : *slots) {
        if (!slot.file.empty() && last_user[slot.file] != i && out[i].empty()) out[i] = slot.file;
      }
    }
  }
  return out;
}

/// Whether an empty cache may stand in for a recorded one: the call's cache_position starts at 0.
inline bool is_first_forward(const ReplayRequest& request) {
  for (const auto& [name, value] : request.kwargs) {
    if (name == "cache_position" && value.kind == PythonValue::Kind::tensor && value.tensor.numel() > 0) {
      return value.tensor.reshape({-1})[0].item<std::int64_t>() == 0;
    }
  }
  return false;
}

/// Replays call `index` on `module` and judges it.
inline void replay_one_call(const Trace& ref, std::size_t index, TracedModuleBase& module, ReplayObserver& observer,
                            const ReplayOptions& options, ReplayedCall& out) {
  try {
    ReplayRequest request = recorded_request(ref, ref.calls[index]);
    request.context.empty_cache_allowed = is_first_forward(request);
    observer.begin();
    bool known = false;
    try {
      known = module.replay_forward(request);
    } catch (...) {
      observer.end();
      throw;
    }
    observer.end();
    out.note = request.context.note;
    if (!known) {
      out.status = ReplayStatus::not_replayable;
      out.reason = "the forward's signature is unknown (overloaded or a template)";
      out.hint = "give the module one non-template forward: replay calls it with its exact parameter types";
      return;
    }
    judge_replayed_call(ref, index, observer, options, out);
  } catch (const NotRebuildable& e) {
    out.status = ReplayStatus::not_replayable;
    out.reason = e.what();
    out.hint = e.hint;
  } catch (const std::exception& e) {
    out.status = ReplayStatus::not_replayable;
    out.reason = "the forward threw on the recorded inputs: " + std::string(exception_message(e));
  }
}

/// Marks diverging calls with no diverging call below them, and puts them first.
inline void order_innermost_first(const Trace& ref, std::vector<ReplayedCall>& calls) {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].status != ReplayStatus::diverges) continue;
    calls[i].innermost = true;
    for (std::size_t j = i + 1; j < calls.size() && ref.calls[j].depth > ref.calls[i].depth; ++j) {
      if (calls[j].status == ReplayStatus::diverges) calls[i].innermost = false;
    }
  }
  std::stable_partition(calls.begin(), calls.end(),
                        [](const ReplayedCall& c) { return c.status == ReplayStatus::diverges && c.innermost; });
}

/// The whole replay of `model` (registered as `root_name`) against the trace at `reference`;
/// `prepare` may change the reference first (a tensor-parallel rank takes its slices).
inline ReplayReport replay_model(torch::nn::Module& model, const std::string& root_name, const std::filesystem::path& reference,
                                 const ReplayOptions& options, const std::function<void(Trace&)>& prepare = {}) {
  Trace ref = read_replay_reference(reference);
  if (prepare) prepare(ref);
  std::map<std::string, TracedModuleBase*> modules;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    if (auto* traced = dynamic_cast<TracedModuleBase*>(item.value().get())) {
      modules[item.key().empty() ? root_name : root_name + "." + item.key()] = traced;
    }
  }
  const auto overwritten = overwritten_files(ref);
  ReplayObserver observer;
  AttachmentSet attachments;
  attachments.attach(model, root_name, observer);
  torch::NoGradGuard no_grad;
  ReplayReport report;
  report.reference = ref.json_file;
  std::map<std::string, std::size_t> per_path;
  for (std::size_t i = 0; i < ref.calls.size(); ++i) {
    auto& out = report.calls.emplace_back();
    out.path = ref.calls[i].module_path;
    out.call = per_path[out.path]++;
    out.depth = ref.calls[i].depth;
    const auto found = modules.find(out.path);
    if (found == modules.end()) {
      out.status = ReplayStatus::not_replayable;
      out.reason = "the port has no traced module at this path";
      out.hint = "register the module under upstream's name (TRACEABLE, and the member's name)";
    } else if (!overwritten[i].empty()) {
      out.status = ReplayStatus::not_replayable;
      out.reason = "a reference value was overwritten by a later call (" + overwritten[i] + " holds the last call's)";
      out.hint = "trace the reference so that each call has its own files (tracetorch's debugger names them _callN_)";
    } else {
      replay_one_call(ref, i, *found->second, observer, options, out);
    }
  }
  order_innermost_first(ref, report.calls);
  return report;
}

}  // namespace tracetorch::detail
