#pragma once
// The example Llama (examples/llama) tensor-parallel over c10d, Megatron's layout as transformers'
// tp_plan lays it out: column-parallel q/k/v/gate/up, row-parallel o/down with an all-reduce
// after each. The same shared decoder parts, the same family name ("Llama": LlamaModel,
// layers.N.self_attn.q_proj, ...) and call conventions, so each rank's trace aligns with a
// single-process trace module by module; only the family's linears differ. Each rank holds
// num_attention_heads / N heads, num_key_value_heads / N key-value heads and intermediate_size / N
// MLP features; a config where one of them does not divide by N is refused, naming the sizes.

#include "llama/llama.hpp"

#include <tracetorch/nn/parallel.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace llama_tp {

/// LlamaConfig with this process's place in the group (nn::process_tensor_parallel() unless set).
struct LlamaConfig : llama::LlamaConfig {
  tracetorch::nn::TensorParallel parallel = tracetorch::nn::process_tensor_parallel();
  /// Test fault injection (LLAMA_TP_FAULT_O_PROJ_OFFSET=R:OFFSET): every o_proj of rank R takes
  /// its slice at OFFSET instead of its own, a planted bug the diff must name.
  std::optional<std::int64_t> o_proj_offset;

  LlamaConfig();
  static LlamaConfig from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  /// llama::LlamaConfig's checks, then heads, key-value heads and intermediate size each divisible
  /// by the world size (tracetorch::Error naming the sizes otherwise).
  void validate(const std::string& where) const;
};
// Its keys are llama::LlamaConfig's (`--set` works with `--world-size`); the rank is no key.
TRACETORCH_CONFIG_EXTENDS(LlamaConfig, llama::LlamaConfig);

/// The family: Llama's name and conventions, the parallel linears.
struct LlamaTP : tracetorch::models::DecoderFamily<LlamaConfig> {
  static constexpr std::string_view name = "Llama";
  using ColwiseLinear = tracetorch::nn::ColwiseLinear;
  using RowwiseLinear = tracetorch::nn::RowwiseLinear;
  static ColwiseLinear colwise_linear(const LlamaConfig& c, const torch::nn::LinearOptions& options) {
    return ColwiseLinear(tracetorch::nn::ParallelLinearOptions{options, c.parallel, std::nullopt});
  }
  static RowwiseLinear rowwise_linear(const LlamaConfig& c, const torch::nn::LinearOptions& options);
};

using LlamaModelImpl = tracetorch::models::ModelImpl<LlamaTP>;
using LlamaModel = tracetorch::models::Model<LlamaTP>;

/// The modules split besides the linears: each MLP's act_fn, on gate_proj's features.
void add_local_modules(std::vector<tracetorch::nn::ModuleShard>& layout);

}  // namespace llama_tp

extern template struct tracetorch::models::RMSNormImpl<llama_tp::LlamaTP>;
extern template struct tracetorch::models::AttentionImpl<llama_tp::LlamaTP>;
extern template struct tracetorch::models::DecoderLayerImpl<llama_tp::LlamaTP>;
extern template struct tracetorch::models::ModelImpl<llama_tp::LlamaTP>;
