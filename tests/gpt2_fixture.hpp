#pragma once
// The tiny GPT-2 of tests/data/gpt2 (written by make_gpt2_fixture.py), shared by
// tests/test_gpt2_trace.cpp and tests/test_gpt2_capture.cpp.

#include "test_helpers.hpp"

#include <gpt2/gpt2.hpp>

namespace gpt2_test {

inline std::filesystem::path gpt2_dir() { return tracetorch_test::data_dir() / "gpt2"; }

/// The fixture's model with its weights, in eval mode (dropout off, as the reference's).
inline gpt2::GPT2Model fixture_model() {
  gpt2::GPT2Model model(gpt2::GPT2Config::from_json_file(gpt2_dir() / "config.json"));
  gpt2::load_state_dict(*model, gpt2_dir() / "model.safetensors");
  model->eval();
  return model;
}

/// The reference's input_ids, int64 [2, 5].
inline torch::Tensor fixture_ids() {
  return tracetorch::safetensors::load_single(gpt2_dir() / "input_ids.safetensors", "input_ids");
}

}  // namespace gpt2_test
