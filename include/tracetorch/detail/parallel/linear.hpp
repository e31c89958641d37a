#pragma once
/// \file
/// The tensor-parallel linears (Megatron's layout, transformers' tp_plan "colwise"/"rowwise"):
/// each rank holds one slice of the full weight and knows where it sits. Column-parallel splits
/// the output features (weight rows, bias); row-parallel splits the input features (weight
/// columns) and all-reduces the partial products through a c10d ProcessGroup before adding the
/// whole bias. Only c10d's ProcessGroup interface is needed here (no Gloo): the group is made by
/// whoever runs the ranks (detail/parallel/process_group.hpp).

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracetorch/detail/parallel/shard_spec.hpp"

namespace tracetorch::detail {

/// This process's place in a tensor-parallel group: its rank, the world size, and the group the
/// row-parallel linears all-reduce through (null with one rank).
struct TensorParallel {
  int rank = 0;
  int world_size = 1;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

/// A parallel linear's options: the full layer's (in and out features, bias), the group, and
/// optionally where this rank's slice starts (default: the even split's rank * size).
struct ParallelLinearOptions {
  torch::nn::LinearOptions linear;
  TensorParallel parallel;
  std::optional<std::int64_t> shard_offset;
};

/// What both parallel linears share: the slice, made from the full layer's own initialisation
/// (so a seeded random model equals the single-process one), and where the slice sits.
class ParallelLinearImpl : public torch::nn::Module {
 public:
  ParallelLinearImpl(ParallelStyle style, const ParallelLinearOptions& options)
      : style(style), parallel(options.parallel), in_features(options.linear.in_features()),
        out_features(options.linear.out_features()) {
    const bool colwise = style == ParallelStyle::colwise;
    const char* split = colwise ? "ColwiseLinear: out_features" : "RowwiseLinear: in_features";
    shard = even_shard(split, colwise ? out_features : in_features, parallel.rank, parallel.world_size);
    if (options.shard_offset) shard.offset = *options.shard_offset;
    if (shard.offset < 0 || shard.offset + shard.size > shard.full) {
      throw Error(std::string(split) + ": a slice of " + std::to_string(shard.size) + " at offset " +
                  std::to_string(shard.offset) + " does not fit in " + std::to_string(shard.full));
    }
    torch::nn::LinearImpl full(options.linear);  // the same random draws as an unsharded nn::Linear
    weight = register_parameter("weight", slice_of_weight(full.weight).clone());
    if (options.linear.bias()) {
      bias = register_parameter("bias", colwise ? full.bias.narrow(0, shard.offset, shard.size).clone() : full.bias.clone());
    }
  }

  /// This rank's slice of a full weight [out, in] of this layer: rows (colwise) or columns (rowwise).
  torch::Tensor slice_of_weight(const torch::Tensor& full_weight) const {
    return full_weight.narrow(weight_dim(), shard.offset, shard.size);
  }
  /// This rank's part of a full bias: its slice (colwise) or the whole (rowwise).
  torch::Tensor slice_of_bias(const torch::Tensor& full_bias) const {
    return style == ParallelStyle::colwise ? full_bias.narrow(0, shard.offset, shard.size) : full_bias;
  }
  /// The dimension of the weight that is split: 0 (rows, colwise) or 1 (columns, rowwise).
  std::int64_t weight_dim() const { return style == ParallelStyle::colwise ? 0 : 1; }

  void pretty_print(std::ostream& stream) const override {
    stream << (style == ParallelStyle::colwise ? "ColwiseLinear" : "RowwiseLinear") << "(in_features=" << in_features
           << ", out_features=" << out_features << ", rank=" << parallel.rank << "/" << parallel.world_size
           << ", slice=[" << shard.offset << ", " << shard.offset + shard.size << "))";
  }

  ParallelStyle style;
  TensorParallel parallel;
  std::int64_t in_features, out_features;  // the full layer's
  ShardSpec shard;                         // along weight_dim()
  torch::Tensor weight, bias;
};

/// Column-parallel: y[..., slice] = x @ W[slice, :]^T + b[slice]; x whole, y this rank's features.
struct ColwiseLinearImpl : ParallelLinearImpl {
  explicit ColwiseLinearImpl(const ParallelLinearOptions& options) : ParallelLinearImpl(ParallelStyle::colwise, options) {}
  ColwiseLinearImpl(const torch::nn::LinearOptions& linear, const TensorParallel& parallel,
                    std::optional<std::int64_t> shard_offset = std::nullopt)
      : ColwiseLinearImpl(ParallelLinearOptions{linear, parallel, shard_offset}) {}
  torch::Tensor forward(const torch::Tensor& input) { return torch::linear(input, weight, bias); }
};

/// Row-parallel: y = sum over ranks of x[..., slice] @ W[:, slice]^T, then + b; x this rank's
/// features, y whole and the same on every rank.
struct RowwiseLinearImpl : ParallelLinearImpl {
  explicit RowwiseLinearImpl(const ParallelLinearOptions& options) : ParallelLinearImpl(ParallelStyle::rowwise, options) {}
  RowwiseLinearImpl(const torch::nn::LinearOptions& linear, const TensorParallel& parallel,
                    std::optional<std::int64_t> shard_offset = std::nullopt)
      : RowwiseLinearImpl(ParallelLinearOptions{linear, parallel, shard_offset}) {}
  torch::Tensor forward(const torch::Tensor& input) {
    if (parallel.world_size == 1) return torch::linear(input, weight, bias);  // nn::Linear's own arithmetic
    if (!parallel.group) throw Error("RowwiseLinear: a world of " + std::to_string(parallel.world_size) + " ranks but no process group");
    std::vector<at::Tensor> tensors{torch::linear(input, weight).contiguous()};
    parallel.group->allreduce(tensors)->wait();
    const auto& partial = tensors[0];
    return bias.defined() ? partial + bias : partial;
  }
};

}  // namespace tracetorch::detail
