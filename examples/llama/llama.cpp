// The model itself: the shared decoder parts instantiated for the Llama family, compiled here
// once (llama.hpp declares them extern). Reading config.json and the weights is in llama_io.cpp,
// so this translation unit holds only what plain LibTorch code would (it is the one
// bench/compile_cost.sh compares with bench/plain_llama.cpp).
#include "llama.hpp"

template struct tracetorch::models::RMSNormImpl<llama::Llama>;
template struct tracetorch::models::AttentionImpl<llama::Llama>;
template struct tracetorch::models::DecoderLayerImpl<llama::Llama>;
template struct tracetorch::models::ModelImpl<llama::Llama>;
