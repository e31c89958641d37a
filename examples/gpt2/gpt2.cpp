// The GPT-2 port: each forward as upstream's eager GPT2Model computes it, operation for operation.
#include "gpt2.hpp"

#include <tracetorch/checkpoint.hpp>

#include <cmath>
#include <limits>

namespace gpt2 {
namespace {

/// [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim] (upstream's _split_heads).
torch::Tensor split_heads(const torch::Tensor& tensor, std::int64_t num_heads, std::int64_t head_dim) {
  std::vector<std::int64_t> shape = tensor.sizes().vec();
  shape.back() = num_heads;
  shape.push_back(head_dim);
  return tensor.view(shape).permute({0, 2, 1, 3});
}

/// The inverse (upstream's _merge_heads).
torch::Tensor merge_heads(const torch::Tensor& tensor, std::int64_t num_heads, std::int64_t head_dim) {
  const torch::Tensor merged = tensor.permute({0, 2, 1, 3}).contiguous();
  std::vector<std::int64_t> shape = merged.sizes().vec();
  shape.resize(shape.size() - 2);
  shape.push_back(num_heads * head_dim);
  return merged.view(shape);
}

}  // namespace

GPT2Config GPT2Config::from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report) {
  return tracetorch::load_config<GPT2Config>(path, report);
}

void GPT2Config::validate(const std::string& where) const {
  const std::string at = "gpt2: " + where;  // every message's start
  const auto fail = [&](const std::string& why) { throw tracetorch::Error(at + ": " + why); };
  tracetorch::check_positive(*this, at, vocab_size, n_positions, n_embd, n_head, n_inner);
  tracetorch::check_not_negative(*this, at, n_layer);
  if (n_embd % n_head != 0) fail("n_embd is not a multiple of n_head");
  tracetorch::nn::get_activation(activation_function);  // throws for an unknown name
}

GPT2MLPImpl::GPT2MLPImpl(std::int64_t intermediate_size, const GPT2Config& config) {
  c_fc = register_module("c_fc", tracetorch::nn::Conv1D(intermediate_size, config.n_embd));
  c_proj = register_module("c_proj", tracetorch::nn::Conv1D(config.n_embd, intermediate_size));
  act = tracetorch::nn::register_activation(*this, "act", config.activation_function);  // ACT2FN[...]
  dropout = register_module("dropout", tracetorch::nn::Dropout(config.resid_pdrop));
}

torch::Tensor GPT2MLPImpl::forward(const torch::Tensor& hidden_states) {
  return dropout(c_proj(act.forward(c_fc(hidden_states))));
}

GPT2AttentionImpl::GPT2AttentionImpl(const GPT2Config& config, std::int64_t layer_idx)
    : embed_dim(config.n_embd),
      num_heads(config.n_head),
      head_dim(config.n_embd / config.n_head),
      split_size(config.n_embd),
      layer_idx(layer_idx),
      scale_attn_weights(config.scale_attn_weights),
      scale_attn_by_inverse_layer_idx(config.scale_attn_by_inverse_layer_idx) {
  const auto max_positions = config.n_positions;
  // Upstream registers both with persistent=False: checkpoints do not hold them.
  bias = register_buffer("bias",
                         torch::tril(torch::ones({max_positions, max_positions}, torch::kBool)).view({1, 1, max_positions, max_positions}),
                         {.persistent = false});
  masked_bias = register_buffer("masked_bias", torch::tensor(-1e4), {.persistent = false});
  c_attn = register_module("c_attn", tracetorch::nn::Conv1D(3 * embed_dim, embed_dim));
  c_proj = register_module("c_proj", tracetorch::nn::Conv1D(embed_dim, embed_dim));
  attn_dropout = register_module("attn_dropout", tracetorch::nn::Dropout(config.attn_pdrop));
  resid_dropout = register_module("resid_dropout", tracetorch::nn::Dropout(config.resid_pdrop));
}

std::tuple<torch::Tensor, torch::Tensor> GPT2AttentionImpl::attn(const torch::Tensor& query, const torch::Tensor& key,
                                                                 const torch::Tensor& value,
                                                                 const torch::Tensor& attention_mask,
                                                                 const torch::Tensor& head_mask) {
  using torch::indexing::Slice;
  auto attn_weights = torch::matmul(query, key.transpose(-1, -2));
  if (scale_attn_weights) {
    // Upstream divides by a 0-d tensor, not a Python float: the same kernel path here.
    attn_weights = attn_weights / torch::full({}, std::pow(static_cast<double>(value.size(-1)), 0.5), attn_weights.options());
  }
  if (scale_attn_by_inverse_layer_idx) attn_weights = attn_weights / static_cast<double>(layer_idx + 1);
  const auto query_length = query.size(-2), key_length = key.size(-2);
  const auto causal_mask = bias.index({Slice(), Slice(), Slice(key_length - query_length, key_length), Slice(0, key_length)});
  const auto mask_value = torch::full({}, std::numeric_limits<float>::lowest(), attn_weights.options());
  attn_weights = torch::where(causal_mask, attn_weights, mask_value);
  if (attention_mask.defined()) attn_weights = attn_weights + attention_mask;
  attn_weights = torch::softmax(attn_weights, -1);
  attn_weights = attn_weights.to(value.scalar_type());
  attn_weights = attn_dropout(attn_weights);
  if (head_mask.defined()) attn_weights = attn_weights * head_mask;
  return {torch::matmul(attn_weights, value), attn_weights};
}

AttentionOutput GPT2AttentionImpl::forward(const torch::Tensor& hidden_states, const GPT2AttentionKeywords& kw) {
  if (kw.encoder_hidden_states.has_value() && kw.encoder_hidden_states->defined()) {
    throw tracetorch::Error("gpt2: cross-attention (encoder_hidden_states) is not ported");
  }
  const auto qkv = c_attn(hidden_states).split(split_size, 2);
  auto query = split_heads(qkv[0], num_heads, head_dim);
  auto key = split_heads(qkv[1], num_heads, head_dim);
  auto value = split_heads(qkv[2], num_heads, head_dim);
  if (kw.layer_past.has_value()) {
    key = torch::cat({std::get<0>(*kw.layer_past), key}, -2);
    value = torch::cat({std::get<1>(*kw.layer_past), value}, -2);
  }
  std::optional<LayerPast> present;
  if (*kw.use_cache) present = LayerPast{key, value};
  auto [attn_output, attn_weights] = attn(query, key, value, *kw.attention_mask, *kw.head_mask);
  attn_output = resid_dropout(c_proj(merge_heads(attn_output, num_heads, head_dim)));
  return {attn_output, present, *kw.output_attentions ? attn_weights : torch::Tensor()};
}

GPT2BlockImpl::GPT2BlockImpl(const GPT2Config& config, std::int64_t layer_idx) {
  const auto inner_dim = config.n_inner.value_or(4 * config.n_embd);
  ln_1 = register_module("ln_1", tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd}).eps(config.layer_norm_epsilon)));
  attn = register_module("attn", GPT2Attention(config, layer_idx));
  ln_2 = register_module("ln_2", tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd}).eps(config.layer_norm_epsilon)));
  mlp = register_module("mlp", GPT2MLP(inner_dim, config));
}

GPT2BlockOutput GPT2BlockImpl::forward(const torch::Tensor& hidden_states, const GPT2BlockKeywords& kw) {
  auto residual = hidden_states;
  auto [attn_output, present, attn_weights] =
      attn(ln_1(hidden_states), {.layer_past = kw.layer_past.or_none(),
                                 .attention_mask = *kw.attention_mask,
                                 .head_mask = *kw.head_mask,
                                 .use_cache = *kw.use_cache,
                                 .output_attentions = *kw.output_attentions});
  auto h = attn_output + residual;
  residual = h;
  h = residual + mlp(ln_2(h));
  GPT2BlockOutput outputs{h};
  if (*kw.use_cache) outputs.push_back(torch::stack({std::get<0>(*present), std::get<1>(*present)}));
  if (*kw.output_attentions) outputs.push_back(attn_weights);
  return outputs;
}

GPT2ModelImpl::GPT2ModelImpl(const GPT2Config& c) : config(c) {
  config.validate("GPT2Config");
  wte = register_module("wte", tracetorch::nn::Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", tracetorch::nn::Embedding(c.n_positions, c.n_embd));
  drop = register_module("drop", tracetorch::nn::Dropout(c.embd_pdrop));
  h = register_module("h", tracetorch::nn::ModuleList());
  for (std::int64_t i = 0; i < c.n_layer; ++i) h->push_back(GPT2Block(c, i));
  ln_f = register_module("ln_f", tracetorch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon)));
}

BaseModelOutputWithPastAndCrossAttentions GPT2ModelImpl::forward(const GPT2ModelInputs& inputs) {
  const bool use_cache = inputs.use_cache.value_or(config.use_cache);
  const bool output_attentions = inputs.output_attentions.value_or(config.output_attentions);
  // Upstream's flags are keywords of this forward; capture reads them from an OutputOptions.
  const tracetorch::OutputOptions options{
      .output_hidden_states = inputs.output_hidden_states.value_or(config.output_hidden_states),
      .output_attentions = output_attentions,
      .use_cache = use_cache};
  return tracetorch::capture_outputs(*this, options, [&] { return run_blocks(inputs, use_cache, output_attentions); });
}

BaseModelOutputWithPastAndCrossAttentions GPT2ModelImpl::run_blocks(const GPT2ModelInputs& inputs, bool use_cache,
                                                                    bool output_attentions) {
  const bool has_ids = inputs.input_ids.has_value() && inputs.input_ids->defined();
  const bool has_embeds = inputs.inputs_embeds.has_value() && inputs.inputs_embeds->defined();
  if (has_ids == has_embeds) throw tracetorch::Error("gpt2: give exactly one of input_ids and inputs_embeds");
  if (has_ids && inputs.input_ids->dim() != 2) throw tracetorch::Error("gpt2: input_ids must be [batch, seq]");
  const auto batch_size = has_ids ? inputs.input_ids->size(0) : inputs.inputs_embeds->size(0);
  const auto seq_length = has_ids ? inputs.input_ids->size(1) : inputs.inputs_embeds->size(1);

  const std::vector<LayerPast> no_past;
  const auto& past = inputs.past_key_values.has_value() ? *inputs.past_key_values : no_past;
  if (!past.empty() && past.size() != h->size()) throw tracetorch::Error("gpt2: past_key_values needs one entry per layer");
  const auto past_length = past.empty() ? 0 : std::get<0>(past[0]).size(-2);
  auto position_ids = *inputs.position_ids;
  if (!position_ids.defined()) position_ids = torch::arange(past_length, seq_length + past_length, torch::kInt64).unsqueeze(0);
  // wpe is a table of n_positions rows: a position past it is refused here, by name, where
  // LibTorch's embedding would say only "index out of range in self".
  if (position_ids.numel() > 0) {
    const auto last = position_ids.max().item<std::int64_t>();
    const auto rows = wpe->weight.size(0);
    if (last >= rows || position_ids.min().item<std::int64_t>() < 0) {
      throw tracetorch::Error("gpt2: position ids go up to " + std::to_string(last) + " (past " + std::to_string(past_length) +
                              " + seq " + std::to_string(seq_length) + "), but n_positions is " + std::to_string(rows) +
                              ": GPT-2's learned position table has no row for them");
    }
  }

  const auto inputs_embeds = has_embeds ? *inputs.inputs_embeds : wte(*inputs.input_ids);
  auto hidden_states = inputs_embeds + wpe(position_ids);

  // A [batch, kv] padding mask of 1/0 becomes [batch, 1, 1, kv] of 0 and float32's minimum.
  torch::Tensor attention_mask = *inputs.attention_mask;
  if (attention_mask.defined()) {
    attention_mask = attention_mask.view({batch_size, -1}).index({torch::indexing::Slice(), torch::indexing::None,
                                                                   torch::indexing::None, torch::indexing::Slice()});
    attention_mask = attention_mask.to(hidden_states.scalar_type());
    attention_mask = (1.0 - attention_mask) * std::numeric_limits<float>::lowest();
  }
  hidden_states = drop(hidden_states);

  BaseModelOutputWithPastAndCrossAttentions out;
  if (use_cache) out.past_key_values.emplace();
  for (std::size_t i = 0; i < h->size(); ++i) {
    // Upstream passes layer_past=None without a past, head_mask=None (get_head_mask of None) and
    // both encoder inputs as None: each is recorded as a keyword. hidden_states and attentions
    // are captured from these calls (can_record_outputs), not collected here.
    const auto outputs = h[i]->as<GPT2Block>()->forward(
        hidden_states, {.layer_past = past.empty() ? std::optional<LayerPast>() : std::optional<LayerPast>(past[i]),
                        .attention_mask = attention_mask,  // undefined: recorded as None
                        .head_mask = nullptr,
                        .encoder_hidden_states = nullptr,
                        .encoder_attention_mask = nullptr,
                        .use_cache = use_cache,
                        .output_attentions = output_attentions});
    hidden_states = outputs[0];
    if (use_cache) out.past_key_values->emplace_back(outputs[1][0], outputs[1][1]);
  }
  out.last_hidden_state = ln_f(hidden_states);
  return out;
}

void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights) {
  tracetorch::checkpoint::load(model, weights);
}

}  // namespace gpt2
