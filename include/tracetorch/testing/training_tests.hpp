#pragma once
/// \file
/// The common tests of the model as a trainable whole: every parameter gets a useful gradient,
/// and the test configuration is small enough to keep the suite fast.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <cstdint>
#include <string_view>

#include "tracetorch/testing/fixture.hpp"

namespace tracetorch::testing::detail {

/// In training mode a loss on last_hidden_state gives every parameter a finite, non-zero gradient.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_training) {
  s.model->train();
  const auto out = s.forward();
  // A fixed random projection: a plain sum would give a final LayerNorm's weight a zero gradient.
  torch::manual_seed(2);
  const auto loss = (out.last_hidden_state * torch::randn_like(out.last_hidden_state)).sum();
  loss.backward();
  for (const auto& item : s.model->named_parameters(/*recurse=*/true)) {
    const torch::Tensor grad = item.value().grad();
    DOCTEST_CHECK_MESSAGE(grad.defined(), item.key() << " got no gradient");
    if (!grad.defined()) continue;
    DOCTEST_CHECK_MESSAGE(torch::isfinite(grad).all().item<bool>(), item.key() << " has a non-finite gradient");
    DOCTEST_CHECK_MESSAGE(grad.abs().sum().item<double>() > 0, item.key() << " has an all-zero gradient");
  }
}

/// The tester's configuration is small (under a million parameters), so the suite stays fast.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_model_is_small) {
  std::int64_t count = 0;
  for (const auto& p : s.model->parameters()) count += p.numel();
  DOCTEST_CHECK_MESSAGE(count < 1'000'000, "the test model has " << count << " parameters; use a smaller config");
}

}  // namespace tracetorch::testing::detail
