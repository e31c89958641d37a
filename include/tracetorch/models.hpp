#pragma once
/// \file
/// Shared parts of transformers' decoder models, as transformers' modular files share Llama's
/// classes: functions with upstream's names and numerics (models/functional.hpp: the causal
/// mask with padding and sliding windows, eager attention with GQA, the rotary kernels), layers
/// (models/layers.hpp: RMSNorm, rotary embedding, gated MLP) and Llama-style attention, decoder
/// layer and model (models/decoder.hpp), each a class template over a family struct that names
/// the family and restates what differs. docs/reference/models.md has the whole story.
///
/// \code
/// struct Qwen3 : tracetorch::models::DecoderFamily<Qwen3Config> {
///   static constexpr std::string_view name = "Qwen3";
///   static constexpr bool qk_norm = true;
/// };
/// tracetorch::models::Model<Qwen3> model(config);   // Qwen3Model.layers.0.self_attn.q_norm, ...
/// \endcode

#include "tracetorch/models/decoder.hpp"
#include "tracetorch/models/functional.hpp"
#include "tracetorch/models/layers.hpp"
