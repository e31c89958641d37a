#pragma once
/// \file
/// Loading an open checkpoint into a module's state dict, in steps: the ties, the plan (which
/// checkpoint tensor goes to which target), the checks of every planned tensor, the strict
/// refusal, and only then the reads and the copies. A refusal leaves the module as it was.

#include <torch/torch.h>

#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tracetorch/detail/checkpoint/open.hpp"
#include "tracetorch/checkpoint/options.hpp"
#include "tracetorch/detail/nn/state_dict.hpp"
#include "tracetorch/detail/text/message_text.hpp"

namespace tracetorch::detail {

/// The module's parameters and persistent buffers by name, as nn::state_dict gives them.
using CheckpointTargets = nn::detail::NamedTensorList;

/// Which checkpoint tensor goes to which target: (target index, checkpoint name), in target order.
using CheckpointPlan = std::vector<std::pair<std::size_t, std::string>>;

/// Options::tied checked against the targets: tied name -> source name.
inline std::map<std::string, std::string> checkpoint_ties(const std::map<std::string, std::size_t>& target_of,
                                                          const std::vector<checkpoint::Tie>& tied,
                                                          const std::filesystem::path& source) {
  std::map<std::string, std::string> tie_source;
  for (const auto& tie : tied) {
    const std::string what = "tie " + quoted_for_message(tie.name) + " -> " + quoted_for_message(tie.source);
    for (const auto* name : {&tie.name, &tie.source}) {
      if (target_of.count(*name) == 0) {
        checkpoint_failed(source, what + ": the module has no parameter or persistent buffer " + quoted_for_message(*name));
      }
    }
    if (tie.name == tie.source) checkpoint_failed(source, what + " ties a tensor to itself");
    if (!tie_source.emplace(tie.name, tie.source).second) {
      checkpoint_failed(source, what + ": " + quoted_for_message(tie.name) + " is tied twice");
    }
  }
  return tie_source;
}

/// Each target's checkpoint tensor (its own, else its tie's source); the missing and unexpected
/// names and the tied targets go into `report`.
inline CheckpointPlan plan_checkpoint_load(const CheckpointTargets& targets, const std::map<std::string, std::size_t>& target_of,
                                           const OpenCheckpoint& checkpoint,
                                           const std::map<std::string, std::string>& tie_source, checkpoint::Report& report) {
  CheckpointPlan plan;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& name = targets[i].first;
    if (checkpoint.reader_of.count(name) != 0) {
      plan.emplace_back(i, name);
    } else if (const auto tie = tie_source.find(name); tie != tie_source.end() && checkpoint.reader_of.count(tie->second) != 0) {
      plan.emplace_back(i, tie->second);
      report.tied.push_back(name);
    } else {
      report.missing_keys.push_back(name);
    }
  }
  for (const auto& [name, reader] : checkpoint.reader_of) {
    if (target_of.count(name) == 0) report.unexpected_keys.push_back(name);
  }
  return plan;
}

/// Refuses a planned tensor whose shape differs from its target's, or whose dtype does under
/// DtypePolicy::keep; lists the conversions of DtypePolicy::convert in `report`.
inline void check_checkpoint_tensors(const CheckpointTargets& targets, const OpenCheckpoint& checkpoint,
                                     const CheckpointPlan& plan, checkpoint::DtypePolicy dtype, checkpoint::Report& report) {
  for (const auto& [index, from] : plan) {
    const auto& [name, target] = targets[index];
    const auto& reader = checkpoint.readers[checkpoint.reader_of.at(from)];
    const auto& info = reader.info(from);
    const std::string tensor = "tensor " + quoted_for_message(from) + (from == name ? "" : " (tied to " + quoted_for_message(name) + ")");
    if (c10::IntArrayRef(info.shape) != target.sizes()) {
      std::ostringstream why;
      why << tensor << " has shape " << c10::IntArrayRef(info.shape) << " but the module expects " << target.sizes();
      checkpoint_failed(reader.path(), why.str());
    }
    if (info.dtype == target.scalar_type()) continue;
    if (dtype == checkpoint::DtypePolicy::keep) {
      checkpoint_failed(reader.path(), tensor + " is " + c10::toString(info.dtype) + " but the module's is " +
                                           c10::toString(target.scalar_type()) +
                                           " (DtypePolicy::keep: convert the module first, or load with DtypePolicy::convert)");
    }
    report.converted.push_back({name, info.dtype, target.scalar_type()});
  }
}

/// `missing tensor "a"; missing tensor "b"`, at most 20 names, then how many more.
inline void append_checkpoint_names(std::string& out, const std::vector<std::string>& names, const std::string& what) {
  constexpr std::size_t kMax = 20;
  for (std::size_t i = 0; i < names.size() && i < kMax; ++i) {
    out += (out.empty() ? "" : "; ") + what + " " + quoted_for_message(names[i]);
  }
  if (names.size() > kMax) out += " (and " + std::to_string(names.size() - kMax) + " more)";
}

/// Options::strict: refuses a load with missing or unexpected names, listing them.
inline void refuse_missing_or_unexpected(const checkpoint::Report& report, const std::filesystem::path& source) {
  if (report.missing_keys.empty() && report.unexpected_keys.empty()) return;
  std::string why;
  append_checkpoint_names(why, report.missing_keys, "missing tensor");
  append_checkpoint_names(why, report.unexpected_keys, "unexpected tensor");
  if (!report.unexpected_keys.empty()) why += " (the module has no such parameter or persistent buffer)";
  checkpoint_failed(source, why);
}

/// Reads every planned tensor, then copies each into its target (converting its dtype).
inline void copy_checkpoint_tensors(const CheckpointTargets& targets, const OpenCheckpoint& checkpoint, const CheckpointPlan& plan) {
  // Everything is read before anything is written: a read that fails leaves the module as it was.
  std::map<std::string, torch::Tensor> staged;
  for (const auto& [index, from] : plan) {
    if (staged.count(from) == 0) staged.emplace(from, checkpoint.readers[checkpoint.reader_of.at(from)].load(from));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [index, from] : plan) {
    torch::Tensor target = targets[index].second;
    target.copy_(staged.at(from));
  }
}

/// Loads `checkpoint` into `targets` (the module's state dict) as checkpoint.hpp describes.
inline checkpoint::Report load_checkpoint(const CheckpointTargets& targets, const OpenCheckpoint& checkpoint,
                                          const checkpoint::Options& options) {
  std::map<std::string, std::size_t> target_of;
  for (std::size_t i = 0; i < targets.size(); ++i) target_of.emplace(targets[i].first, i);
  const auto tie_source = checkpoint_ties(target_of, options.tied, checkpoint.source);

  checkpoint::Report report;
  for (const auto& reader : checkpoint.readers) report.files.push_back(reader.path());
  const auto plan = plan_checkpoint_load(targets, target_of, checkpoint, tie_source, report);
  check_checkpoint_tensors(targets, checkpoint, plan, options.dtype, report);
  if (options.strict) refuse_missing_or_unexpected(report, checkpoint.source);
  copy_checkpoint_tensors(targets, checkpoint, plan);
  report.loaded = plan.size();
  return report;
}

}  // namespace tracetorch::detail
