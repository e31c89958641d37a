#pragma once
// The baseline of the benchmarks: the Llama of examples/llama written with plain LibTorch
// modules only (TORCH_MODULE, torch::nn::Linear, torch::nn::Embedding), no tracetorch. Same
// math, same call order and same parameter names, so the weights copy over by name and the
// outputs are identical.

#include <torch/torch.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace plain_llama {

struct Config {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 2048;
  std::int64_t intermediate_size = 5504;
  std::int64_t num_hidden_layers = 16;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 16;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
};

using PositionEmbeddings = std::tuple<torch::Tensor, torch::Tensor>;

struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(std::int64_t hidden_size, double eps);
  torch::Tensor forward(const torch::Tensor& hidden_states);
  torch::Tensor weight;
  double variance_epsilon;
};
TORCH_MODULE(RMSNorm);

struct RotaryEmbeddingImpl : torch::nn::Module {
  explicit RotaryEmbeddingImpl(const Config& config);
  PositionEmbeddings forward(const torch::Tensor& x, const torch::Tensor& position_ids);
  torch::Tensor inv_freq;
};
TORCH_MODULE(RotaryEmbedding);

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const Config& config);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  torch::nn::SiLU act_fn{nullptr};
};
TORCH_MODULE(MLP);

/// One layer's keys and values, kept for the forward as the annotated port's DynamicCache keeps them.
struct LayerCache {
  torch::Tensor keys, values;
};

struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const Config& config);
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& hidden_states,
                                                   const PositionEmbeddings& position_embeddings,
                                                   const torch::Tensor& attention_mask, LayerCache* cache = nullptr);
  std::int64_t head_dim, num_heads, num_kv_heads;
  double scaling;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TORCH_MODULE(Attention);

struct DecoderLayerImpl : torch::nn::Module {
  explicit DecoderLayerImpl(const Config& config);
  /// The layer's output; its attention weights go to `attention_weights` where given.
  torch::Tensor forward(const torch::Tensor& hidden_states, const PositionEmbeddings& position_embeddings,
                        const torch::Tensor& attention_mask, LayerCache* cache = nullptr,
                        torch::Tensor* attention_weights = nullptr);
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct ModelImpl : torch::nn::Module {
  explicit ModelImpl(const Config& config);
  /// last_hidden_state [batch, seq, hidden].
  torch::Tensor forward(const torch::Tensor& input_ids);
  /// last_hidden_state, with the hidden states and attention maps collected by hand, as a port
  /// without tracetorch would return them: what transformers' output_hidden_states and
  /// output_attentions give (the embedding output, each layer's output with the last one
  /// replaced by the normed one; each layer's attention weights).
  torch::Tensor forward_collecting(const torch::Tensor& input_ids, std::vector<torch::Tensor>& hidden_states,
                                   std::vector<torch::Tensor>& attentions);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  RotaryEmbedding rotary_emb{nullptr};

 private:
  torch::Tensor run(const torch::Tensor& input_ids, std::vector<torch::Tensor>* all_hidden,
                    std::vector<torch::Tensor>* all_attentions);
};
TORCH_MODULE(Model);

}  // namespace plain_llama
