// The Llava port's forwards, and the shared decoder parts instantiated for its Llama, compiled once.
#include "llava.hpp"

#include <sstream>

template struct tracetorch::models::RMSNormImpl<llava::Llama>;
template struct tracetorch::models::AttentionImpl<llava::Llama>;
template struct tracetorch::models::DecoderLayerImpl<llava::Llama>;
template struct tracetorch::models::ModelImpl<llava::Llama>;

namespace llava {

namespace {
bool given(const Keyword<torch::Tensor>& k) { return k.has_value() && k->defined(); }
}  // namespace

LlavaMultiModalProjectorImpl::LlavaMultiModalProjectorImpl(const LlavaConfig& c) {
  using torch::nn::LinearOptions;
  const auto text_hidden = c.text_config.hidden_size;
  linear_1 = register_module("linear_1", tracetorch::nn::Linear(LinearOptions(c.vision_config.hidden_size, text_hidden).bias(c.multimodal_projector_bias)));
  act = tracetorch::nn::register_activation(*this, "act", c.projector_hidden_act);
  linear_2 = register_module("linear_2", tracetorch::nn::Linear(LinearOptions(text_hidden, text_hidden).bias(c.multimodal_projector_bias)));
}

torch::Tensor LlavaMultiModalProjectorImpl::forward(const torch::Tensor& image_features) {
  return linear_2(act.forward(linear_1(image_features)));
}

LlavaModelImpl::LlavaModelImpl(const LlavaConfig& c) : config(c) {
  config.validate("LlavaModel");
  vision_tower = register_module("vision_tower", tracetorch::models::CLIPVisionModel(c.vision_config));
  multi_modal_projector = register_module("multi_modal_projector", LlavaMultiModalProjector(c));
  language_model = register_module("language_model", LlamaModel(TextConfig(c.text_config)));
}

ImageFeaturesOutput LlavaModelImpl::get_image_features(const torch::Tensor& pixel_values, const ImageFeaturesKeywords& kw) {
  const auto layer = kw.vision_feature_layer.has_value() ? *kw.vision_feature_layer : config.vision_feature_layer;
  const auto strategy = kw.vision_feature_select_strategy.has_value() ? *kw.vision_feature_select_strategy : config.vision_feature_select_strategy;
  // Every hidden state is kept to pick one, as upstream does ("not memory efficient at all").
  auto image_outputs = vision_tower(pixel_values, {}, {.output_hidden_states = true, .return_dict = true});
  const auto& hidden_states = *image_outputs.hidden_states;
  const auto count = static_cast<std::int64_t>(hidden_states.size());
  if (layer < -count || layer >= count) {
    throw tracetorch::Error("LlavaModel: vision_feature_layer " + std::to_string(layer) + " is out of range for " + std::to_string(count) + " hidden states");
  }
  auto selected = hidden_states[static_cast<std::size_t>(layer < 0 ? layer + count : layer)];
  if (strategy == "default") {
    selected = selected.slice(1, 1);  // [:, 1:]: the CLS position dropped
  } else if (strategy != "full") {
    throw tracetorch::Error("LlavaModel: vision_feature_select_strategy must be 'default' or 'full', got '" + strategy + "'");
  }
  const auto image_features = multi_modal_projector(selected);
  return {.last_hidden_state = image_outputs.last_hidden_state,
          .pooler_output = image_features.unbind(0),  // list(image_features)
          .hidden_states = std::move(image_outputs.hidden_states),
          .attentions = std::move(image_outputs.attentions)};
}

torch::Tensor LlavaModelImpl::get_placeholder_mask(const torch::Tensor& input_ids, const torch::Tensor& inputs_embeds,
                                                   const torch::Tensor& image_features) {
  torch::Tensor mask;
  if (!input_ids.defined()) {
    const auto token = torch::tensor(config.image_token_index, torch::TensorOptions(torch::kInt64).device(inputs_embeds.device()));
    mask = (inputs_embeds == get_input_embeddings()(token)).all(-1);
  } else {
    mask = input_ids == config.image_token_index;
  }
  const auto n_image_tokens = mask.sum().item<std::int64_t>();
  if (n_image_tokens * inputs_embeds.size(-1) != image_features.numel()) {
    std::ostringstream why;
    why << "LlavaModel: Image features and image tokens do not match, tokens: " << n_image_tokens
        << ", features: " << image_features.size(0) * image_features.size(1);
    throw tracetorch::Error(why.str());
  }
  return mask.unsqueeze(-1).to(inputs_embeds.device());
}

LlavaModelOutputWithPast LlavaModelImpl::forward(const LlavaModelInputs& kw, const tracetorch::OutputOptions& options) {
  if (given(kw.input_ids) == given(kw.inputs_embeds)) throw tracetorch::Error("LlavaModel: You must specify exactly one of input_ids or inputs_embeds");
  if (given(kw.image_sizes)) throw tracetorch::Error("LlavaModel: image_sizes is not ported");
  auto inputs_embeds = given(kw.inputs_embeds) ? *kw.inputs_embeds : get_input_embeddings()(*kw.input_ids);
  torch::Tensor image_features;
  if (given(kw.pixel_values)) {
    const auto features = get_image_features(*kw.pixel_values, {.vision_feature_layer = kw.vision_feature_layer,
                                                                .vision_feature_select_strategy = kw.vision_feature_select_strategy});
    image_features = torch::cat(features.pooler_output, 0).to(inputs_embeds.device(), inputs_embeds.scalar_type());
    const auto mask = get_placeholder_mask(given(kw.input_ids) ? *kw.input_ids : torch::Tensor(), inputs_embeds, image_features);
    inputs_embeds = inputs_embeds.masked_scatter(mask, image_features);
  }
  auto outputs = language_model({.attention_mask = kw.attention_mask.or_none(),
                                 .position_ids = kw.position_ids.or_none(),
                                 .past_key_values = kw.past_key_values.or_none(),
                                 .inputs_embeds = inputs_embeds},
                                options);
  return {.last_hidden_state = outputs.last_hidden_state,
          .past_key_values = outputs.past_key_values,
          .hidden_states = std::move(outputs.hidden_states),
          .attentions = std::move(outputs.attentions),
          .image_hidden_states = image_features};
}

LlavaForConditionalGenerationImpl::LlavaForConditionalGenerationImpl(const LlavaConfig& c) : config(c) {
  if (c.tie_word_embeddings || c.text_config.tie_word_embeddings) {
    throw tracetorch::Error("LlavaForConditionalGeneration: tie_word_embeddings is not ported");
  }
  model = register_module("model", LlavaModel(c));
  lm_head = register_module("lm_head", tracetorch::nn::Linear(torch::nn::LinearOptions(c.text_config.hidden_size, c.text_config.vocab_size).bias(false)));
}

LlavaCausalLMOutputWithPast LlavaForConditionalGenerationImpl::forward(const LlavaForConditionalGenerationInputs& kw,
                                                                       const tracetorch::OutputOptions& options) {
  auto handed = options;  // @can_return_tuple pops return_dict; the rest is **kwargs
  handed.return_dict.reset();
  auto outputs = model({.input_ids = kw.input_ids.or_none(),
                        .pixel_values = kw.pixel_values.or_none(),
                        .attention_mask = kw.attention_mask.or_none(),
                        .position_ids = kw.position_ids.or_none(),
                        .past_key_values = kw.past_key_values.or_none(),
                        .inputs_embeds = kw.inputs_embeds.or_none(),
                        .vision_feature_layer = kw.vision_feature_layer.or_none(),
                        .vision_feature_select_strategy = kw.vision_feature_select_strategy.or_none(),
                        .image_sizes = kw.image_sizes.or_none()},
                       handed);
  const auto keep = *kw.logits_to_keep;  // hidden_states[:, slice(-logits_to_keep, None), :]
  return {.logits = lm_head(outputs.last_hidden_state.slice(1, keep == 0 ? 0 : -keep)),
          .past_key_values = outputs.past_key_values,
          .hidden_states = std::move(outputs.hidden_states),
          .attentions = std::move(outputs.attentions),
          .image_hidden_states = outputs.image_hidden_states};
}

}  // namespace llava
