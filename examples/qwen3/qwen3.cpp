// The shared decoder parts instantiated for the Qwen3 family, compiled here once.
#include "qwen3.hpp"

template struct tracetorch::models::RMSNormImpl<qwen3::Qwen3>;
template struct tracetorch::models::AttentionImpl<qwen3::Qwen3>;
template struct tracetorch::models::DecoderLayerImpl<qwen3::Qwen3>;
template struct tracetorch::models::ModelImpl<qwen3::Qwen3>;
