#pragma once
// A Llava vision-language model (transformers' 5.x LlavaForConditionalGeneration, modeling_llava.py)
// on tracetorch's shared parts: the CLIP vision tower of <tracetorch/models/clip.hpp>, the
// multi-modal projector, and a Llama language model (modeling_llama.py at 0233e509) as a family of
// <tracetorch/models.hpp>. ../shared/reference/llava_ref.py restates upstream in plain torch.
//   model(input_ids=, pixel_values=, attention_mask=)       -> model({.input_ids = ids, ...}, options)
//     model(input_ids=, ..., image_sizes=None, **kwargs)     LlavaModel: every keyword named, None if unpassed
//       language_model.embed_tokens(input_ids)
//       vision_tower(pixel_values, output_hidden_states=True, return_dict=True)
//       multi_modal_projector(hidden_states[vision_feature_layer][:, 1:])   ("default" drops CLS)
//       inputs_embeds.masked_scatter(input_ids == image_token_id, image_features)
//       language_model(attention_mask=, position_ids=, past_key_values=, inputs_embeds=, **kwargs)
//     lm_head(hidden_states[:, -logits_to_keep:, :])
// The language model at 0233e509 differs from examples/llama's era in its call conventions only:
// rotary_emb(h, position_ids=ids) by keyword, each layer gets use_cache and the model's **kwargs
// (the output flags) after cache_position, and self_attn the same **kwargs.

#include <tracetorch/config_file.hpp>
#include <tracetorch/models.hpp>
#include <tracetorch/models/clip.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llava {

/// rope_parameters as transformers 5.x writes them; only the default rope is ported here.
struct RopeParameters {
  std::string rope_type = "default";
  double rope_theta = 10000.0;
};
TRACETORCH_CONFIG(RopeParameters, rope_type, rope_theta);

/// transformers' 5.x LlamaConfig keys and defaults (text_config).
struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 11008;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::optional<std::int64_t> num_key_value_heads;  // null: num_attention_heads
  std::string hidden_act = "silu";
  std::int64_t max_position_embeddings = 2048;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  bool use_cache = true;
  std::optional<std::int64_t> pad_token_id;
  std::optional<std::int64_t> bos_token_id = 1;
  std::optional<std::int64_t> eos_token_id = 2;
  std::int64_t pretraining_tp = 1;
  bool tie_word_embeddings = false;
  RopeParameters rope_parameters;
  bool attention_bias = false;
  double attention_dropout = 0.0;
  bool mlp_bias = false;
  std::optional<std::int64_t> head_dim;  // null: hidden_size / num_attention_heads
  bool output_hidden_states = false;
  bool output_attentions = false;

  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(LlamaConfig, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, hidden_act, max_position_embeddings, initializer_range, rms_norm_eps, use_cache,
                  pad_token_id, bos_token_id, eos_token_id, pretraining_tp, tie_word_embeddings, rope_parameters,
                  attention_bias, attention_dropout, mlp_bias, head_dim, output_hidden_states, output_attentions);

/// What the shared decoder parts read: LlamaConfig with num_key_value_heads resolved.
struct TextConfig : LlamaConfig {
  std::int64_t num_key_value_heads = 0;
  explicit TextConfig(const LlamaConfig& c = {})
      : LlamaConfig(c), num_key_value_heads(c.num_key_value_heads.value_or(c.num_attention_heads)) {}
};

/// transformers' 5.x LlavaConfig keys and defaults, with the nested configs.
struct LlavaConfig {
  tracetorch::models::CLIPVisionConfig vision_config;
  LlamaConfig text_config;
  std::int64_t image_token_index = 32000;  // also read as image_token_id (upstream's attribute_map)
  std::int64_t image_seq_length = 576;
  std::string projector_hidden_act = "gelu";
  std::string vision_feature_select_strategy = "default";
  std::int64_t vision_feature_layer = -2;  // an int; upstream also takes a list (not ported)
  bool multimodal_projector_bias = true;
  bool tie_word_embeddings = false;

  /// Reads a transformers config.json (tracetorch::load_config): a key of the wrong type names its
  /// full key ("vision_config.hidden_size"); keys no field takes go to `report`, or to stderr.
  static LlavaConfig from_json_file(const std::filesystem::path& path, tracetorch::ConfigReport* report = nullptr);
  void validate(const std::string& where) const;
};
TRACETORCH_CONFIG(LlavaConfig, vision_config, text_config, image_token_index, image_seq_length, projector_hidden_act,
                  vision_feature_select_strategy, vision_feature_layer, multimodal_projector_bias, tie_word_embeddings);
TRACETORCH_CONFIG_ATTRIBUTE_MAP(LlavaConfig, {{"image_token_id", "image_token_index"}});  // upstream's attribute_map

using tracetorch::Keyword;
using tracetorch::models::PositionEmbeddings;

/// LlamaDecoderLayer.forward's keywords as LlamaModel passes them at 0233e509 (its **kwargs, the
/// caller's output flags, follow: hand_on_output_flags).
struct LlamaDecoderLayerKeywords {
  Keyword<torch::Tensor> attention_mask;
  Keyword<PositionEmbeddings> position_embeddings;
  Keyword<torch::Tensor> position_ids;
  Keyword<tracetorch::DynamicCache*> past_key_values;
  Keyword<bool> use_cache = tracetorch::defaults_to(false);
  Keyword<torch::Tensor> cache_position;
};
TRACETORCH_KEYWORDS(LlamaDecoderLayerKeywords, attention_mask, position_embeddings, position_ids, past_key_values,
                    use_cache, cache_position);

/// What Llama at 0233e509 changes in the shared parts' (9ee3f431) conventions.
struct Llama : tracetorch::models::DecoderFamily<TextConfig> {
  static constexpr std::string_view name = "Llama";
  static constexpr bool rotary_position_ids_keyword = true;
  static constexpr bool cache_only_when_used = true;
  static constexpr bool hand_on_output_flags = true;  // the model call's **kwargs reach every layer and self_attn
  using Activation = torch::nn::AnyModule;  // ACT2FN[config.hidden_act]
  using DecoderLayerKeywords = llava::LlamaDecoderLayerKeywords;
  static constexpr bool layers_get_use_cache = true;
  // The layer passes its self_attn hidden_states and its keywords in the shared parts' order.
};
using LlamaModel = tracetorch::models::Model<Llama>;

/// linear_1, act (ACT2FN[projector_hidden_act]), linear_2.
struct LlavaMultiModalProjectorImpl : torch::nn::Module {
  explicit LlavaMultiModalProjectorImpl(const LlavaConfig& config);
  torch::Tensor forward(const torch::Tensor& image_features);

  tracetorch::nn::Linear linear_1{nullptr}, linear_2{nullptr};
  torch::nn::AnyModule act;
};
TRACEABLE(LlavaMultiModalProjector);

/// get_image_features' keywords (None: the config's).
struct ImageFeaturesKeywords {
  Keyword<std::int64_t> vision_feature_layer;
  Keyword<std::string> vision_feature_select_strategy;
};

/// What get_image_features returns: the tower's BaseModelOutputWithPooling with pooler_output
/// replaced by the projected features, one [patches, text hidden] tensor per image.
struct ImageFeaturesOutput {
  torch::Tensor last_hidden_state;
  std::vector<torch::Tensor> pooler_output;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
};
TRACETORCH_OUTPUT(ImageFeaturesOutput, last_hidden_state, pooler_output, hidden_states, attentions);

/// LlavaModel.forward's keywords, in its order.
struct LlavaModelInputs {
  Keyword<torch::Tensor> input_ids;
  Keyword<torch::Tensor> pixel_values;
  Keyword<torch::Tensor> attention_mask;
  Keyword<torch::Tensor> position_ids;
  Keyword<std::shared_ptr<tracetorch::DynamicCache>> past_key_values;
  Keyword<torch::Tensor> inputs_embeds;
  Keyword<std::int64_t> vision_feature_layer;
  Keyword<std::string> vision_feature_select_strategy;
  Keyword<torch::Tensor> image_sizes;
};
TRACETORCH_KEYWORDS(LlavaModelInputs, input_ids, pixel_values, attention_mask, position_ids, past_key_values, inputs_embeds,
                    vision_feature_layer, vision_feature_select_strategy, image_sizes);

struct LlavaModelOutputWithPast {
  torch::Tensor last_hidden_state;
  std::shared_ptr<tracetorch::DynamicCache> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  torch::Tensor image_hidden_states;  // [images * patches, text hidden]; undefined without pixel_values
};
TRACETORCH_OUTPUT(LlavaModelOutputWithPast, last_hidden_state, past_key_values, hidden_states, attentions, image_hidden_states);

/// vision_tower, multi_modal_projector, language_model.
struct LlavaModelImpl : torch::nn::Module {
  explicit LlavaModelImpl(const LlavaConfig& config);
  LlavaModelOutputWithPast forward(const LlavaModelInputs& kw, const tracetorch::OutputOptions& options = {});
  tracetorch::nn::Embedding& get_input_embeddings() { return language_model->embed_tokens; }
  /// The vision tower's outputs (its hidden_states) and the projected features, as upstream's
  /// model.get_image_features(pixel_values=...).
  ImageFeaturesOutput get_image_features(const torch::Tensor& pixel_values, const ImageFeaturesKeywords& kw = {});
  /// input_ids == image_token_id (without ids: embeddings equal to the image token's), [batch,
  /// seq, 1]; a tracetorch::Error when the image tokens and features do not match.
  torch::Tensor get_placeholder_mask(const torch::Tensor& input_ids, const torch::Tensor& inputs_embeds,
                                     const torch::Tensor& image_features);

  LlavaConfig config;
  tracetorch::models::CLIPVisionModel vision_tower{nullptr};
  LlavaMultiModalProjector multi_modal_projector{nullptr};
  LlamaModel language_model{nullptr};
};
TRACEABLE(LlavaModel);

/// LlavaForConditionalGeneration.forward's keywords, in its order (labels: not ported).
struct LlavaForConditionalGenerationInputs {
  Keyword<torch::Tensor> input_ids;
  Keyword<torch::Tensor> pixel_values;
  Keyword<torch::Tensor> attention_mask;
  Keyword<torch::Tensor> position_ids;
  Keyword<std::shared_ptr<tracetorch::DynamicCache>> past_key_values;
  Keyword<torch::Tensor> inputs_embeds;
  Keyword<std::int64_t> vision_feature_layer;
  Keyword<std::string> vision_feature_select_strategy;
  Keyword<std::int64_t> logits_to_keep = tracetorch::defaults_to(std::int64_t{0});
  Keyword<torch::Tensor> image_sizes;
};
TRACETORCH_KEYWORDS(LlavaForConditionalGenerationInputs, input_ids, pixel_values, attention_mask, position_ids,
                    past_key_values, inputs_embeds, vision_feature_layer, vision_feature_select_strategy, logits_to_keep,
                    image_sizes);

struct LlavaCausalLMOutputWithPast {
  torch::Tensor logits;
  std::shared_ptr<tracetorch::DynamicCache> past_key_values;
  std::optional<std::vector<torch::Tensor>> hidden_states;
  std::optional<std::vector<torch::Tensor>> attentions;
  torch::Tensor image_hidden_states;
};
TRACETORCH_OUTPUT(LlavaCausalLMOutputWithPast, logits, past_key_values, hidden_states, attentions, image_hidden_states);

/// The root: model, then lm_head over the last logits_to_keep positions (0: all).
struct LlavaForConditionalGenerationImpl : torch::nn::Module {
  explicit LlavaForConditionalGenerationImpl(const LlavaConfig& config);
  LlavaCausalLMOutputWithPast forward(const LlavaForConditionalGenerationInputs& kw, const tracetorch::OutputOptions& options = {});
  ImageFeaturesOutput get_image_features(const torch::Tensor& pixel_values, const ImageFeaturesKeywords& kw = {}) {
    return model->get_image_features(pixel_values, kw);
  }

  LlavaConfig config;
  LlavaModel model{nullptr};
  tracetorch::nn::Linear lm_head{nullptr};
};
TRACEABLE(LlavaForConditionalGeneration);

/// Loads a transformers checkpoint strictly by name (tracetorch::checkpoint::load).
void load_state_dict(torch::nn::Module& model, const std::filesystem::path& weights);

}  // namespace llava

// Compiled once, in llava.cpp.
extern template struct tracetorch::models::RMSNormImpl<llava::Llama>;
extern template struct tracetorch::models::AttentionImpl<llava::Llama>;
extern template struct tracetorch::models::DecoderLayerImpl<llava::Llama>;
extern template struct tracetorch::models::ModelImpl<llava::Llama>;
