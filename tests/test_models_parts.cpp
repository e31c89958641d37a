// <tracetorch/models.hpp>: each shared part against the Python references' values
// (tests/data/models/make_models_cases.py), and the family mechanism (names, qk_norm, a
// sliding window, Gemma's embedding scale) through small models.

#include <doctest/doctest.h>

#include <tracetorch/models.hpp>

#include "test_helpers.hpp"

#include <cmath>
#include <string_view>

namespace models_parts_test {

torch::Tensor expected(const std::string& name) {
  static tracetorch::safetensors::Reader reader(tracetorch_test::data_dir() / "models" / "models_cases.safetensors");
  return reader.load(name);
}

struct TinyConfig {
  std::int64_t vocab_size = 50, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2;
  std::int64_t num_attention_heads = 4, num_key_value_heads = 2;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  bool use_cache = true, output_hidden_states = false, output_attentions = false;
  std::optional<std::int64_t> sliding_window;
  std::optional<tracetorch::models::RopeScaling> rope_scaling;
};

struct Tiny : tracetorch::models::DecoderFamily<TinyConfig> {
  static constexpr std::string_view name = "Tiny";
};
struct TinyQk : tracetorch::models::DecoderFamily<TinyConfig> {
  static constexpr std::string_view name = "TinyQk";
  static constexpr bool qk_norm = true;
};
struct TinyGemma : tracetorch::models::DecoderFamily<TinyConfig> {
  static constexpr std::string_view name = "TinyGemma";
  static constexpr auto rms_norm = tracetorch::models::RMSNormKind::one_plus_weight;
  static constexpr bool scale_embeddings = true;
};

torch::Tensor f32_mask(const torch::Tensor& cache_position, std::int64_t kv, const torch::Tensor& padding,
                       std::optional<std::int64_t> window = std::nullopt, torch::ScalarType dtype = torch::kFloat32) {
  return tracetorch::models::create_causal_mask(cache_position, 3, kv, 0, padding, window, dtype);
}

/// A layer convention of another order, with a keyword the model's LayerCall does not hold.
struct ReorderedLayerKeywords {
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<tracetorch::models::PositionEmbeddings> position_embeddings;
  tracetorch::Keyword<bool> use_cache = tracetorch::defaults_to(false);
  tracetorch::Keyword<std::int64_t> sliding_window_size;
};
TRACETORCH_KEYWORDS(ReorderedLayerKeywords, attention_mask, position_embeddings, use_cache, sliding_window_size);

struct TinyReordered : tracetorch::models::DecoderFamily<TinyConfig> {
  using DecoderLayerKeywords = ReorderedLayerKeywords;
  static constexpr bool layers_get_use_cache = true;
};

/// A family whose self_attn takes its keywords flat, hidden_states beside the rest (no `.layer`).
struct FlatAttentionKeywords {
  tracetorch::Keyword<torch::Tensor> hidden_states;
  tracetorch::Keyword<torch::Tensor> attention_mask;
  tracetorch::Keyword<tracetorch::DynamicCache*> past_key_values;
  tracetorch::Keyword<tracetorch::models::PositionEmbeddings> position_embeddings;
};
TRACETORCH_KEYWORDS(FlatAttentionKeywords, hidden_states, attention_mask, past_key_values, position_embeddings);

struct TinyFlat : tracetorch::models::DecoderFamily<TinyConfig> {
  static constexpr std::string_view name = "TinyFlat";
  using AttentionKeywords = FlatAttentionKeywords;
  template <class LayerKeywords>
  static AttentionKeywords attention_keywords(const torch::Tensor& hidden_states, const LayerKeywords& kw) {
    return {.hidden_states = hidden_states,
            .attention_mask = kw.attention_mask,
            .past_key_values = kw.past_key_values,
            .position_embeddings = kw.position_embeddings};
  }
};

}  // namespace models_parts_test

DOCTEST_TEST_SUITE("models") {

using namespace models_parts_test;

DOCTEST_TEST_CASE("models: create_causal_mask as upstream builds it: padding, a cache's past, a window, the dtype's minimum") {
  const auto padding = expected("mask_padding.attention_mask");
  DOCTEST_CHECK(torch::equal(f32_mask(torch::arange(5), 5, padding), expected("mask_padding.expected")));
  DOCTEST_CHECK(torch::equal(f32_mask(torch::arange(5), 5, {}), expected("mask_causal.expected")));
  DOCTEST_CHECK(torch::equal(f32_mask(torch::arange(5), 5, padding, 2), expected("mask_sliding.expected")));
  DOCTEST_CHECK(torch::equal(f32_mask(torch::arange(5, 7), 7, expected("mask_cached.attention_mask")), expected("mask_cached.expected")));
  const auto bf16 = f32_mask(torch::arange(5), 5, padding, std::nullopt, torch::kBFloat16);
  DOCTEST_CHECK((bf16.scalar_type() == torch::kBFloat16));
  DOCTEST_CHECK(torch::equal(bf16, expected("mask_bf16.expected")));
  // A fully padded query row holds only the minimum; a 4-d mask is used as it is.
  DOCTEST_CHECK(expected("mask_padding.expected")[1][0][0].max().item<float>() == std::numeric_limits<float>::lowest());
  const auto four_d = torch::zeros({3, 1, 5, 5});
  DOCTEST_CHECK(f32_mask(torch::arange(5), 5, four_d).is_same(four_d));
  // A mask shorter than the keys pads with "padding", as upstream's prepare_padding_mask does.
  const auto short_mask = f32_mask(torch::arange(5), 5, padding.slice(1, 0, 4));
  DOCTEST_CHECK(torch::equal(short_mask.slice(3, 0, 4), expected("mask_padding.expected").slice(3, 0, 4)));
  DOCTEST_CHECK(short_mask.select(3, 4).max().item<float>() == std::numeric_limits<float>::lowest());
  DOCTEST_CHECK_THROWS_WITH_AS(f32_mask(torch::arange(5), 5, torch::ones({2, 5})), doctest::Contains("attention_mask must be [batch = 3"),
                               tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(f32_mask(torch::arange(5), 5, padding, 0), tracetorch::Error);
}

DOCTEST_TEST_CASE("models: the rotary embedding, default and llama3, as upstream computes it") {
  const auto positions = expected("rotary.position_ids");
  const auto x = torch::zeros({2, 6, 64});
  auto [inv_freq, scaling] = tracetorch::models::rope_inv_freq(10000.0, 16);
  DOCTEST_CHECK(torch::equal(inv_freq, expected("rotary_default.inv_freq")));
  DOCTEST_CHECK(scaling == 1.0);
  auto [cos, sin] = tracetorch::models::rotary_cos_sin(inv_freq, scaling, x, positions);
  DOCTEST_CHECK(torch::equal(cos, expected("rotary_default.cos")));
  DOCTEST_CHECK(torch::equal(sin, expected("rotary_default.sin")));
  auto [cos16, sin16] = tracetorch::models::rotary_cos_sin(inv_freq, scaling, x.to(torch::kBFloat16), positions);
  DOCTEST_CHECK(torch::equal(cos16, expected("rotary_default_bf16.cos")));
  DOCTEST_CHECK(torch::equal(sin16, expected("rotary_default_bf16.sin")));

  const tracetorch::models::RopeScaling llama3{.rope_type = "llama3", .factor = 8.0, .low_freq_factor = 1.0,
                                              .high_freq_factor = 8.0, .original_max_position_embeddings = 64};
  // Through the module, as a Llama 3 config gives it: head_dim 16 from hidden 64 over 4 heads.
  TinyConfig config{.hidden_size = 64, .num_attention_heads = 4, .rope_scaling = llama3};
  tracetorch::models::RotaryEmbedding<Tiny> rotary(config);
  DOCTEST_CHECK(rotary->rope_type == "llama3");
  DOCTEST_CHECK(torch::equal(rotary->inv_freq, expected("rotary_llama3.inv_freq")));
  DOCTEST_CHECK_FALSE(torch::equal(rotary->inv_freq, inv_freq));
  const auto [cos3, sin3] = rotary(x, positions);
  DOCTEST_CHECK(torch::equal(cos3, expected("rotary_llama3.cos")));
  DOCTEST_CHECK(torch::equal(sin3, expected("rotary_llama3.sin")));
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::models::rope_inv_freq(10000.0, 16, tracetorch::models::RopeScaling{.rope_type = "yarn"}),
                               doctest::Contains("\"yarn\" is not ported"), tracetorch::Error);

  const auto [q, k] = tracetorch::models::apply_rotary_pos_emb(expected("attention.query").slice(0, 0, 2), expected("attention.key").slice(0, 0, 2),
                                                               cos.slice(1, 0, 5).slice(2, 0, 8), sin.slice(1, 0, 5).slice(2, 0, 8));
  DOCTEST_CHECK(torch::equal(q, expected("apply_rotary.q")));
  DOCTEST_CHECK(torch::equal(k, expected("apply_rotary.k")));
}

DOCTEST_TEST_CASE("models: eager_attention_forward with grouped-query heads returns upstream's output and weights") {
  const auto [output, weights] = tracetorch::models::eager_attention_forward(
      expected("attention.query"), expected("attention.key"), expected("attention.value"), expected("mask_padding.expected"),
      std::pow(8.0, -0.5));
  DOCTEST_CHECK((output.sizes() == c10::IntArrayRef{3, 5, 4, 8}));
  DOCTEST_CHECK(torch::equal(output, expected("attention.output")));
  DOCTEST_CHECK(torch::equal(weights, expected("attention.weights")));
  // Heads 0 and 1 share key/value head 0: repeat_kv repeats each head in place.
  const auto repeated = tracetorch::models::repeat_kv(expected("attention.key"), 2);
  DOCTEST_CHECK(torch::equal(repeated.select(1, 1), expected("attention.key").select(1, 0)));
  DOCTEST_CHECK(torch::equal(repeated.select(1, 2), expected("attention.key").select(1, 1)));
  DOCTEST_CHECK_THROWS_AS(tracetorch::models::eager_attention_forward(expected("attention.key"), expected("attention.query"),
                                                                      expected("attention.value"), {}, 1.0),
                          tracetorch::Error);
}

DOCTEST_TEST_CASE("models: RMSNorm, weight and (1 + weight), computed in float32 for any input dtype") {
  const auto hidden = expected("rms.hidden");
  tracetorch::models::RMSNorm<Tiny> llama_norm(16, 1e-5);
  tracetorch::models::RMSNorm<TinyGemma> gemma_norm(16, 1e-5);
  DOCTEST_CHECK(torch::equal(llama_norm->weight, torch::ones({16})));   // upstream's initial values
  DOCTEST_CHECK(torch::equal(gemma_norm->weight, torch::zeros({16})));
  {
    torch::NoGradGuard no_grad;
    llama_norm->weight.copy_(expected("rms.weight"));
    gemma_norm->weight.copy_(expected("rms.weight"));
  }
  DOCTEST_CHECK(torch::equal(llama_norm(hidden), expected("rms_weight.expected")));
  DOCTEST_CHECK(torch::equal(gemma_norm(hidden), expected("rms_one_plus.expected")));
  const auto llama16 = llama_norm(hidden.to(torch::kBFloat16));
  DOCTEST_CHECK((llama16.scalar_type() == expected("rms_weight_bf16.expected").scalar_type()));
  DOCTEST_CHECK(torch::equal(llama16, expected("rms_weight_bf16.expected")));
  DOCTEST_CHECK(torch::equal(gemma_norm(hidden.to(torch::kBFloat16)), expected("rms_one_plus_bf16.expected")));
}

DOCTEST_TEST_CASE("models: a family names its classes; qk_norm adds q_norm and k_norm; Model<F> is traceable") {
  static_assert(tracetorch::models::RMSNorm<Tiny>::ContainedType::registered_name == "TinyRMSNorm");
  static_assert(tracetorch::models::Attention<TinyQk>::ContainedType::registered_name == "TinyQkAttention");
  static_assert(tracetorch::models::Model<Tiny>::ContainedType::registered_name == "TinyModel");
  static_assert(tracetorch::is_traceable_v<tracetorch::models::DecoderLayerImpl<Tiny>>);
  static_assert(tracetorch::is_traceable_v<tracetorch::models::GatedMLP<Tiny>>);
  static_assert(!std::is_same_v<tracetorch::models::Attention<Tiny>, tracetorch::models::Attention<TinyQk>>);
  tracetorch::models::Model<Tiny> plain(TinyConfig{});
  tracetorch::models::Model<TinyQk> qk(TinyConfig{});
  const auto names = [](torch::nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& item : m.named_parameters()) out.push_back(item.key());
    return out;
  };
  const auto plain_names = names(*plain), qk_names = names(*qk);
  DOCTEST_CHECK(qk_names.size() == plain_names.size() + 2 * 2);  // q_norm.weight and k_norm.weight per layer
  DOCTEST_CHECK(std::find(qk_names.begin(), qk_names.end(), "layers.1.self_attn.k_norm.weight") != qk_names.end());
  DOCTEST_CHECK(qk->layers[0]->as<tracetorch::models::DecoderLayerImpl<TinyQk>>()->self_attn->q_norm->weight.size(0) == 4);
  const auto out = qk({.input_ids = torch::randint(50, {2, 5})});
  DOCTEST_CHECK((out.last_hidden_state.sizes() == c10::IntArrayRef{2, 5, 16}));
  DOCTEST_CHECK(out.past_key_values->get_seq_length() == 5);
}

DOCTEST_TEST_CASE("models: a layer's keywords are filled from the model's LayerCall by name; use_cache only where the family says") {
  using namespace models_parts_test;
  tracetorch::DynamicCache cache;
  const tracetorch::models::LayerCall call{.attention_mask = torch::ones({1}), .position_ids = torch::zeros({1}),
                                           .past_key_values = &cache, .use_cache = true};
  // Llama's convention: every keyword but use_cache, which keeps the layer's default.
  const auto llama = tracetorch::detail::layer_keywords_of<Tiny>(call);
  DOCTEST_CHECK(llama.attention_mask.passed());
  DOCTEST_CHECK(llama.position_ids.passed());
  DOCTEST_CHECK(*llama.past_key_values == &cache);
  DOCTEST_CHECK(llama.cache_position.passed());
  DOCTEST_CHECK_FALSE(llama.use_cache.passed());
  DOCTEST_CHECK_FALSE(*llama.use_cache);
  // Another struct: its own order, use_cache passed, a keyword the call lacks left unpassed.
  const auto reordered = tracetorch::detail::layer_keywords_of<TinyReordered>(call);
  DOCTEST_CHECK(torch::equal(*reordered.attention_mask, torch::ones({1})));
  DOCTEST_CHECK(reordered.position_embeddings.passed());
  DOCTEST_CHECK(reordered.use_cache.passed());
  DOCTEST_CHECK(*reordered.use_cache);
  DOCTEST_CHECK_FALSE(reordered.sliding_window_size.passed());
}

DOCTEST_TEST_CASE("models: a family's flat attention keywords are read as the shared .layer ones are") {
  using namespace models_parts_test;
  torch::manual_seed(3);
  tracetorch::models::Model<Tiny> shared(TinyConfig{});
  tracetorch::models::Model<TinyFlat> flat(TinyConfig{});
  {
    torch::NoGradGuard no_grad;
    const auto from = shared->named_parameters();
    for (auto& item : flat->named_parameters()) item.value().copy_(from[item.key()]);
  }
  const auto ids = torch::randint(50, {2, 5});
  const auto expected_out = shared({.input_ids = ids});
  const auto out = flat({.input_ids = ids});
  DOCTEST_CHECK(torch::equal(out.last_hidden_state, expected_out.last_hidden_state));
  DOCTEST_CHECK(out.past_key_values->get_seq_length() == 5);  // the flat struct's cache was updated
}

DOCTEST_TEST_CASE("models: a config's sliding_window masks each layer's attention to the window") {
  torch::manual_seed(3);
  tracetorch::models::Model<Tiny> model(TinyConfig{.sliding_window = 2});
  model->eval();
  const auto ids = torch::randint(50, {2, 6});
  const auto out = model({.input_ids = ids}, {.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions.has_value());
  for (const auto& weights : *out.attentions) {
    const auto i = torch::arange(6).unsqueeze(1), j = torch::arange(6).unsqueeze(0);
    const auto outside = (j <= i - 2) | (j > i);
    DOCTEST_CHECK(weights.masked_select(outside.expand_as(weights)).abs().max().item<float>() == 0.0f);
    DOCTEST_CHECK(weights.masked_select((j == i - 1).expand_as(weights)).min().item<float>() > 0.0f);
  }
  // The same weights without the window attend further back.
  tracetorch::models::Model<Tiny> full(TinyConfig{});
  full->eval();
  {
    torch::NoGradGuard no_grad;
    for (auto& item : full->named_parameters()) item.value().copy_(model->named_parameters()[item.key()]);
  }
  const auto full_out = full({.input_ids = ids}, {.output_attentions = true});
  DOCTEST_CHECK((*full_out.attentions)[0][0][0][5][0].item<float>() > 0.0f);
  DOCTEST_CHECK_FALSE(torch::allclose(full_out.last_hidden_state, out.last_hidden_state));
}

DOCTEST_TEST_CASE("models: Gemma's embedding scale: the first layer gets embed_tokens(ids) * sqrt(hidden) in the hidden dtype") {
  torch::manual_seed(4);
  tracetorch::models::Model<TinyGemma> model(TinyConfig{});
  const auto ids = torch::randint(50, {1, 4});
  const auto out = model({.input_ids = ids}, {.output_hidden_states = true});
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  const auto scaled = model->embed_tokens(ids) * torch::tensor(std::pow(16.0, 0.5), torch::kFloat32);
  DOCTEST_CHECK(torch::equal((*out.hidden_states)[0], scaled));
  DOCTEST_CHECK(torch::equal(model->norm->weight, torch::zeros({16})));
}

}  // DOCTEST_TEST_SUITE("models")

namespace models_parts_test {

// Gemma2's attention config: its scaling and logit soft-cap, read by the shared attention.
struct CappedConfig : TinyConfig {
  double query_pre_attn_scalar = 9.0;
  std::optional<double> attn_logit_softcapping = 0.5;  // small, so that the cap shows
  std::string hidden_activation = "gelu_pytorch_tanh";
};
struct TinyCapped : tracetorch::models::DecoderFamily<CappedConfig> {
  static constexpr std::string_view name = "TinyCapped";
  using Activation = torch::nn::AnyModule;  // ACT2FN[config.hidden_activation]
};

// A config whose validate hook derives layer_types (Gemma2's: sliding, then full, alternating).
struct DerivingConfig : TinyConfig {
  std::vector<std::string> layer_types;
  void validate(const std::string&) {
    for (std::int64_t i = static_cast<std::int64_t>(layer_types.size()); i < num_hidden_layers; ++i) {
      layer_types.emplace_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
  }
};
struct TinyDeriving : tracetorch::models::DecoderFamily<DerivingConfig> {
  static constexpr std::string_view name = "TinyDeriving";
};

// A family whose layers are its own (as Gemma2's four-norm layer): residual + its MLP, no attention.
struct TinyOwnLayer : tracetorch::models::DecoderFamily<TinyConfig> {
  static constexpr std::string_view name = "TinyOwnLayer";
};
struct AddOneLayerImpl : torch::nn::Module {
  AddOneLayerImpl(const TinyConfig& c, std::int64_t layer_idx) : index(layer_idx) {
    mlp = register_module("mlp", tracetorch::models::GatedMLP<TinyOwnLayer>(c));
  }
  torch::Tensor forward(const torch::Tensor& hidden_states, const tracetorch::models::DecoderLayerKeywords& kw) {
    seen_cache = kw.past_key_values.value_or(nullptr) != nullptr;
    return hidden_states + mlp(hidden_states);
  }
  std::int64_t index;
  bool seen_cache = false;
  tracetorch::models::GatedMLP<TinyOwnLayer> mlp{nullptr};
};
TRACEABLE(AddOneLayer);

}  // namespace models_parts_test

template <>
struct tracetorch::models::FamilyDecoderLayer<models_parts_test::TinyOwnLayer> {
  using type = models_parts_test::AddOneLayer;
};

DOCTEST_TEST_SUITE("models") {

using namespace models_parts_test;

DOCTEST_TEST_CASE("models: Gemma's embedding scale comes after rotary_emb, which records the unscaled embeddings, as upstream") {
  torch::manual_seed(5);
  tracetorch::models::Model<TinyGemma> model(TinyConfig{});
  model->eval();
  tracetorch_test::TempDir dir;
  {
    auto guard = tracetorch::model_addition_debugger(model, {.debug_path = dir.path(), .do_prune_layers = false});
    model({.input_ids = torch::randint(50, {1, 4})});
  }
  const auto tree = tracetorch_test::read_json(dir.path() / "TinyGemmaModel_debug_tree_SUMMARY.json");
  boost::json::value embedded, rotary_input;
  for (const auto& child : tree.at("children").as_array()) {
    if (child.at("module_path") == "TinyGemmaModel.embed_tokens") embedded = child.at("outputs");
    if (child.at("module_path") == "TinyGemmaModel.rotary_emb") rotary_input = child.at("inputs").at("args").at(0);
  }
  DOCTEST_REQUIRE(embedded.is_object());
  DOCTEST_CHECK(rotary_input == embedded);  // the same printed statistics: not scaled by sqrt(16)
}

DOCTEST_TEST_CASE("models: a cache over sliding layers keeps their window: a second call on it equals the whole forward") {
  torch::manual_seed(6);
  tracetorch::models::Model<Tiny> model(TinyConfig{.sliding_window = 3});
  model->eval();
  torch::NoGradGuard no_grad;
  const auto ids = torch::randint(50, {2, 7});
  const auto whole = model({.input_ids = ids});
  const auto first = model({.input_ids = ids.slice(1, 0, 5)});
  DOCTEST_CHECK(tracetorch_repr(*first.past_key_values) == "DynamicCache(layers=[DynamicSlidingWindowLayer, DynamicSlidingWindowLayer])");
  DOCTEST_CHECK(first.past_key_values->keys(0).size(2) == 2);  // window - 1 kept
  const auto rest = model({.input_ids = ids.slice(1, 5), .past_key_values = first.past_key_values}, {.output_attentions = true});
  DOCTEST_CHECK(torch::allclose(rest.last_hidden_state, whole.last_hidden_state.slice(1, 5), 1e-5, 1e-6));
  DOCTEST_CHECK(rest.past_key_values->get_seq_length() == 7);
  // Each new token attends over the 2 kept keys and the 2 new ones: a mask of 4 keys, from key 3.
  DOCTEST_REQUIRE(rest.attentions.has_value());
  DOCTEST_CHECK((*rest.attentions)[0].sizes() == torch::IntArrayRef({2, 4, 2, 4}));
}

DOCTEST_TEST_CASE("models: query_pre_attn_scalar, attn_logit_softcapping and hidden_activation, where the config has them (Gemma2)") {
  torch::manual_seed(7);
  tracetorch::models::Model<TinyCapped> model(CappedConfig{});
  model->eval();
  auto attention = model->layers[0]->as<tracetorch::models::DecoderLayer<TinyCapped>>()->self_attn;
  DOCTEST_CHECK(attention->scaling == std::pow(9.0, -0.5));
  DOCTEST_CHECK(attention->softcap == 0.5);
  const auto ids = torch::randint(50, {1, 5});
  const auto out = model({.input_ids = ids}, {.output_attentions = true});
  // Soft-capped logits lie within +-0.5, so no weight of a row's 5 keys can exceed e / (e + 4 e^-1) ~ 0.65.
  DOCTEST_CHECK((*out.attentions)[0][0].slice(1, 4).max().item<float>() < 0.65f);
  const auto q = torch::randn({1, 2, 3, 4}), k = torch::randn({1, 1, 3, 4}), v = torch::randn({1, 1, 3, 4});
  const auto [capped_out, capped] = tracetorch::models::eager_attention_forward(q, k, v, {}, 1.0, 0.0, false, 0.5);
  const auto logits = torch::tanh(torch::matmul(q, k.expand({1, 2, 3, 4}).transpose(2, 3)) / 0.5) * 0.5;
  DOCTEST_CHECK(torch::allclose(capped, torch::softmax(logits, -1)));
  // The MLP's act_fn is ACT2FN[hidden_activation], GELU's tanh form.
  auto mlp = model->layers[0]->as<tracetorch::models::DecoderLayer<TinyCapped>>()->mlp;
  const auto x = torch::randn({3, 24});
  DOCTEST_CHECK(torch::allclose(mlp->act_fn.forward(x), torch::gelu(x, "tanh")));
  DOCTEST_CHECK_FALSE(torch::allclose(mlp->act_fn.forward(x), torch::silu(x)));
}

DOCTEST_TEST_CASE("models: a family's own decoder layer (FamilyDecoderLayer) is built, called with the layer keywords, and recorded") {
  torch::manual_seed(8);
  tracetorch::models::Model<models_parts_test::TinyOwnLayer> model(TinyConfig{});
  model->eval();
  const auto ids = torch::randint(50, {1, 3});
  const auto out = model({.input_ids = ids}, {.output_hidden_states = true});
  auto h = model->embed_tokens(ids);
  for (const auto& layer : *model->layers) {
    auto own = layer->as<models_parts_test::AddOneLayer>();
    DOCTEST_REQUIRE(own);
    DOCTEST_CHECK(own->seen_cache);  // the LayerCall's past_key_values handed to it
    h = h + own->mlp(h);
  }
  DOCTEST_CHECK(torch::allclose(out.last_hidden_state, model->norm(h)));
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  DOCTEST_CHECK(out.hidden_states->size() == 3);  // each own layer's input, then the last
}

}  // DOCTEST_TEST_SUITE("models")

DOCTEST_TEST_SUITE("models") {

DOCTEST_TEST_CASE("models: Model<F> builds its layers from the config its validate hook derived (layer_types), not the one given") {
  models_parts_test::DerivingConfig config;
  config.sliding_window = 2;  // layer_types left empty: the hook derives them
  tracetorch::models::Model<models_parts_test::TinyDeriving> model(config);
  DOCTEST_CHECK(model->config.layer_types == std::vector<std::string>{"sliding_attention", "full_attention"});
  using Layer = tracetorch::models::DecoderLayer<models_parts_test::TinyDeriving>;
  DOCTEST_CHECK(model->layers[0]->as<Layer>()->self_attn->sliding_window == 2);
  DOCTEST_CHECK(!model->layers[1]->as<Layer>()->self_attn->sliding_window);
  const auto out = model({.input_ids = torch::randint(50, {1, 3})});
  DOCTEST_CHECK(tracetorch_repr(*out.past_key_values) == "DynamicCache(layers=[DynamicSlidingWindowLayer, DynamicLayer])");
}

}  // DOCTEST_TEST_SUITE("models")
