#pragma once
/// \file
/// Tensor-parallel building blocks (Megatron's layout, transformers' tp_plan "colwise" and
/// "rowwise") over a c10d ProcessGroup. Opt-in: not included by tracetorch.hpp, and a program
/// that makes a process group from the environment uses tracetorch/distributed.hpp and links
/// the CMake target tracetorch::c10d (Gloo). This header itself needs only LibTorch.
///
/// Each layer is declared with the full layer's sizes and its rank's place; it holds its slice,
/// knows where the slice sits (`shard`: offset, size, full along the split features), loads its
/// slice from an ordinary checkpoint (load_sharded) and, row-parallel, all-reduces its partial
/// product through the group before adding the bias.
///
/// \code
/// // rank 1 of 2: q_proj keeps output features [32, 64) of 64, o_proj input features [32, 64).
/// tracetorch::nn::TensorParallel tp{.rank = 1, .world_size = 2};   // .group: a c10d ProcessGroup
/// tracetorch::nn::ColwiseLinear q_proj(torch::nn::LinearOptions(64, 64).bias(false), tp);
/// tracetorch::nn::RowwiseLinear o_proj(torch::nn::LinearOptions(64, 64).bias(false), tp);
/// // q_proj->weight is [32, 64], q_proj->shard == {.offset = 32, .size = 32, .full = 64}
/// \endcode

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tracetorch/checkpoint.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/detail/parallel/linear.hpp"
#include "tracetorch/detail/parallel/load.hpp"

namespace tracetorch::nn {

/// This process's rank, the world size and the c10d ProcessGroup (null with one rank).
using TensorParallel = ::tracetorch::detail::TensorParallel;
/// The full layer's LinearOptions, the TensorParallel, and optionally the slice's offset
/// (default: the even split, rank * size).
using ParallelLinearOptions = ::tracetorch::detail::ParallelLinearOptions;
/// A slice along the split features: [offset, offset + size) of full.
using ShardSpec = ::tracetorch::detail::ShardSpec;
/// colwise, rowwise, or local (an elementwise module on split features, e.g. the MLP's act_fn).
using ParallelStyle = ::tracetorch::detail::ParallelStyle;
/// A module of the trace split over the ranks: its path, style and this rank's ShardSpec.
using ModuleShard = ::tracetorch::detail::ModuleShard;

/// Column-parallel linear: weight [out / N, in] (rows [offset, offset + size)), its bias slice;
/// output this rank's features. Traced like any layer.
TRACETORCH_TRACEABLE_IMPL(ColwiseLinear, ::tracetorch::detail::ColwiseLinearImpl);
/// Row-parallel linear: weight [out, in / N] (columns [offset, offset + size)), the whole bias;
/// input this rank's features, output all-reduced, the same on every rank.
TRACETORCH_TRACEABLE_IMPL(RowwiseLinear, ::tracetorch::detail::RowwiseLinearImpl);

/// The tensor-parallel place of this process, set once by the program that joined the group
/// (tracetorch/distributed.hpp) and read by configs that build parallel layers.
inline TensorParallel& process_tensor_parallel() {
  static TensorParallel parallel;
  return parallel;
}

/// Loads an ordinary checkpoint (a file, a folder or a transformers index, as checkpoint::load)
/// into a model with parallel linears: every tensor checked at its full shape as the strict load
/// checks it, each parallel linear keeping its slice. (The full tensors are read, then sliced:
/// memory for the whole checkpoint's parallel tensors at once.)
inline checkpoint::Report load_sharded(torch::nn::Module& model, const std::filesystem::path& path,
                                       const checkpoint::Options& options = {}) {
  auto targets = state_dict(model);
  const auto sharded = ::tracetorch::detail::widen_sharded_targets(model, targets);
  const auto report = ::tracetorch::detail::load_checkpoint(targets, ::tracetorch::detail::open_checkpoint(path, options), options);
  ::tracetorch::detail::copy_shards(sharded);
  return report;
}

/// Every parallel linear of `model` as the trace names it (`root` + "." + its path), with its
/// style and split: what a rank's trace records as the shard specs of its values.
inline std::vector<ModuleShard> parallel_layout(const torch::nn::Module& model, const std::string& root) {
  return ::tracetorch::detail::parallel_layout_of(model, root);
}

}  // namespace tracetorch::nn
