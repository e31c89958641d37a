#pragma once
/// \file
/// The common tests that one forward agrees with another: run twice, after a save and load,
/// from inputs_embeds instead of input_ids, batched or row by row, on non-contiguous inputs.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/testing/checks.hpp"
#include "tracetorch/testing/fixture.hpp"
#include "tracetorch/testing/tester.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/safetensors.hpp"

namespace tracetorch::testing::detail {

/// Two forwards in eval mode give the same outputs, every one the model can return asked for.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_determinism) {
  torch::NoGradGuard no_grad;
  const auto first = s.forward(all_outputs<Tester>());
  check_requested_outputs("first forward", first, all_outputs<Tester>());
  const auto second = s.forward(all_outputs<Tester>());
  check_outputs_close("second forward", second, first, 1e-5);
}

/// What a checkpoint holds: PyTorch's state dict, non-persistent buffers left out (nn/state_dict.hpp).
inline std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& model) {
  return ::tracetorch::nn::state_dict(model);
}

/// The state dict written to safetensors and read into a freshly initialised model gives the
/// same outputs; names and shapes match one to one.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_save_load) {
  torch::NoGradGuard no_grad;
  const auto reference = s.forward();
  ScratchDir dir;
  const auto file = dir.path() / "model.safetensors";
  safetensors::NamedTensors saved;
  for (const auto& [key, tensor] : state_dict(*s.model)) saved.emplace_back(key, tensor.detach().contiguous());
  safetensors::save(file, saved);

  torch::manual_seed(12345);  // other random weights than the saved ones
  auto fresh = s.tester.make_model();
  fresh->eval();
  const auto loaded = safetensors::load(file);
  const auto targets = state_dict(*fresh);
  DOCTEST_CHECK_MESSAGE(loaded.size() == targets.size(),
                        "the file holds " << loaded.size() << " tensors, the model " << targets.size());
  for (const auto& [key, target] : targets) {
    const auto found = loaded.find(key);
    DOCTEST_REQUIRE_MESSAGE(found != loaded.end(), key << " is missing from the saved state dict");
    DOCTEST_REQUIRE_MESSAGE(found->second.sizes() == target.sizes(), key << ": shape " << shape_text(found->second)
                                                                          << " in the file, " << shape_text(target)
                                                                          << " in the model");
    target.copy_(found->second);
  }
  const auto out = s.tester.forward(fresh, s.inputs, {});
  check_outputs_close("after loading", out, reference, 1e-6);
}

/// Embedding input_ids with the model's input embeddings and passing inputs_embeds instead
/// gives the same outputs.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_inputs_embeds_matches_input_ids) {
  if constexpr (!requires(model_t<Tester>& model, torch::Tensor ids) { model->get_input_embeddings()(ids); }) {
    static_assert(missing<Tester>,
                  "tracetorch::testing: test_inputs_embeds_matches_input_ids needs model->get_input_embeddings() "
                  "and a forward that takes inputs[\"inputs_embeds\"] in place of inputs[\"input_ids\"]; add them, "
                  "or skip the test with a reason");
  } else {
    torch::NoGradGuard no_grad;
    DOCTEST_REQUIRE_MESSAGE(s.inputs.count("input_ids") == 1, "make_inputs() gives no input_ids");
    const auto from_ids = s.forward();
    Inputs with_embeds = s.inputs;
    with_embeds["inputs_embeds"] = s.model->get_input_embeddings()(with_embeds.at("input_ids"));
    with_embeds.erase("input_ids");
    const auto from_embeds = s.forward(with_embeds);
    check_outputs_close("inputs_embeds path", from_embeds, from_ids, 1e-5);
  }
}

/// A batch of B gives, row by row, what B batches of one give.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_batching_equivalence) {
  torch::NoGradGuard no_grad;
  DOCTEST_REQUIRE_MESSAGE(s.sizes.batch_size >= 2, "the tester's batch_size must be at least 2");
  const auto batched = output_tensors(s.forward(all_outputs<Tester>()));
  for (std::int64_t row = 0; row < s.sizes.batch_size; ++row) {
    Inputs single;
    for (const auto& [key, tensor] : s.inputs) single[key] = tensor.slice(0, row, row + 1);
    const auto alone = output_tensors(s.forward(single, all_outputs<Tester>()));
    DOCTEST_REQUIRE(alone.size() == batched.size());
    for (std::size_t i = 0; i < alone.size(); ++i) {
      if (!batched[i].tensor.defined()) continue;
      check_close("row " + std::to_string(row) + ": " + alone[i].name, alone[i].tensor,
                  batched[i].tensor.slice(0, row, row + 1), 1e-5);
    }
  }
}

/// Inputs with the same values but non-contiguous strides give the same outputs.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_non_contiguous_input) {
  torch::NoGradGuard no_grad;
  Inputs strided;
  for (const auto& [key, tensor] : s.inputs) {
    // Every other element of a tensor twice as wide: same values, stride 2 on the last dim.
    strided[key] = torch::stack({tensor, torch::zeros_like(tensor)}, -1).select(-1, 0);
    const bool strided_now = !strided[key].is_contiguous() || tensor.numel() <= 1;
    DOCTEST_CHECK_MESSAGE(strided_now, key << " is still contiguous");
    DOCTEST_CHECK(torch::equal(strided[key], tensor));
  }
  check_outputs_close("non-contiguous inputs", s.forward(strided, all_outputs<Tester>()), s.forward(all_outputs<Tester>()), 1e-5);
}

}  // namespace tracetorch::testing::detail
