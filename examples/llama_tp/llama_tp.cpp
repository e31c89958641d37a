// The tensor-parallel Llama: its config's checks and the shared parts instantiated for it.
#include "llama_tp/llama_tp.hpp"

#include <cstdlib>

template struct tracetorch::models::RMSNormImpl<llama_tp::LlamaTP>;
template struct tracetorch::models::AttentionImpl<llama_tp::LlamaTP>;
template struct tracetorch::models::DecoderLayerImpl<llama_tp::LlamaTP>;
template struct tracetorch::models::ModelImpl<llama_tp::LlamaTP>;

namespace llama_tp {
namespace {

/// LLAMA_TP_FAULT_O_PROJ_OFFSET=R:OFFSET, for rank `rank`: OFFSET when R is this rank.
std::optional<std::int64_t> planted_o_proj_offset(int rank) {
  const char* text = std::getenv("LLAMA_TP_FAULT_O_PROJ_OFFSET");
  if (text == nullptr) return std::nullopt;
  const std::string fault(text);
  const auto colon = fault.find(':');
  if (colon == std::string::npos || std::stoi(fault.substr(0, colon)) != rank) return std::nullopt;
  return std::stoll(fault.substr(colon + 1));
}

}  // namespace

LlamaConfig::LlamaConfig() : o_proj_offset(planted_o_proj_offset(parallel.rank)) {}

LlamaConfig LlamaConfig::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  LlamaConfig config;
  static_cast<llama::LlamaConfig&>(config) = llama::LlamaConfig::from_json_file(path, report);
  config.validate(path.string());
  return config;
}

void LlamaConfig::validate(const std::string& where) const {
  llama::LlamaConfig::validate(where);
  const auto world = parallel.world_size;
  const std::pair<const char*, std::int64_t> split[] = {
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"intermediate_size", intermediate_size},
  };
  std::string refused;
  for (const auto& [key, value] : split) {
    if (value % world != 0) refused += std::string(refused.empty() ? "" : ", ") + key + " " + std::to_string(value);
  }
  if (!refused.empty()) {
    throw tracetorch::Error("llama_tp: " + where + ": " + refused + " not divisible by the world size " + std::to_string(world) +
                            " (num_attention_heads " + std::to_string(num_attention_heads) + ", num_key_value_heads " +
                            std::to_string(num_key_value_heads) + ", intermediate_size " + std::to_string(intermediate_size) +
                            " must each divide by it)");
  }
}

LlamaTP::RowwiseLinear LlamaTP::rowwise_linear(const LlamaConfig& c, const torch::nn::LinearOptions& options) {
  // o_proj is the row-parallel linear over the heads' features (down_proj's are intermediate_size).
  const bool o_proj = options.in_features() == c.num_attention_heads * tracetorch::detail::head_dim_of(c);
  return RowwiseLinear(tracetorch::nn::ParallelLinearOptions{options, c.parallel, o_proj ? c.o_proj_offset : std::nullopt});
}

void add_local_modules(std::vector<tracetorch::nn::ModuleShard>& layout) {
  const std::string gate = ".mlp.gate_proj";
  const auto count = layout.size();
  for (std::size_t i = 0; i < count; ++i) {
    const auto& shard = layout[i];
    if (!shard.module_path.ends_with(gate)) continue;
    const auto mlp = shard.module_path.substr(0, shard.module_path.size() - gate.size()) + ".mlp.act_fn";
    layout.push_back({mlp, tracetorch::nn::ParallelStyle::local, shard.features});
  }
}

}  // namespace llama_tp
