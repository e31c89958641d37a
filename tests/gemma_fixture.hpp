#pragma once
// The tiny Gemma of tests/data/gemma (written by make_gemma_fixture.py): a sharded bfloat16
// checkpoint loaded into the float32 port. Used by tests/test_gemma_trace.cpp.

#include "test_helpers.hpp"

#include <gemma/gemma.hpp>

namespace gemma_test {

inline std::filesystem::path gemma_dir() { return tracetorch_test::data_dir() / "gemma"; }

/// The fixture's model with its weights (the sharded checkpoint, converted to float32), in eval
/// mode as the reference's.
inline gemma::GemmaModel fixture_model() {
  gemma::GemmaModel model(gemma::GemmaConfig::from_json_file(gemma_dir() / "config.json"));
  gemma::load_state_dict(*model, gemma_dir() / "model.safetensors.index.json");
  model->eval();
  return model;
}

/// The reference's input_ids, int64 [2, 5].
inline torch::Tensor fixture_ids() {
  return tracetorch::safetensors::load_single(gemma_dir() / "input_ids.safetensors", "input_ids");
}

}  // namespace gemma_test
