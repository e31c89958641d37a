// The debugger's statistics (detail/debugger/tensor_stats.hpp): the float32 fast path against
// the LibTorch functions Python's debugger calls, printed alike.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

DOCTEST_TEST_CASE("statistics: the float32 fast path prints what LibTorch's mean/std/min/max print") {
  // The fast path (contiguous float32 on the CPU) computes std's sum and min/max its own way;
  // the general path calls the LibTorch functions Python's debugger calls. Both must print alike.
  const auto general = [](const torch::Tensor& t) {
    boost::json::object record;
    record["mean"] = tracetorch::python_repr(t.mean());
    record["std"] = tracetorch::python_repr(t.std());
    record["min"] = tracetorch::python_repr(t.min());
    record["max"] = tracetorch::python_repr(t.max());
    return record;
  };
  const auto fast = [](const torch::Tensor& t) {
    boost::json::object record;
    tracetorch::detail::add_statistics(record, t);
    return record;
  };
  torch::manual_seed(11);
  std::vector<torch::Tensor> cases;
  for (int i = 0; i < 600; ++i) {
    const std::int64_t n = 1 + (i * 7919) % (i % 3 == 0 ? 50 : 300'000);
    cases.push_back(torch::randn({n}) * std::pow(10.0, i % 9 - 4) + (i % 5) * 0.25);
  }
  cases.push_back(torch::tensor({1.5f}));                       // one element: std nan
  cases.push_back(torch::zeros({7}));                           // all zero: min/max 0.
  cases.push_back(torch::tensor({0.0f, -0.0f, 1.0f}));          // signed zeros
  cases.push_back(torch::tensor({-0.0f, 0.0f, -1.0f}));
  cases.push_back(torch::tensor({1.0f, NAN, 2.0f}));            // NaN propagates
  cases.push_back(torch::tensor({1.0f, INFINITY, -2.0f}));      // inf: std nan
  cases.push_back(torch::tensor({-INFINITY, -INFINITY}));
  cases.push_back(torch::randn({4, 30, 64}));                   // multi-dimensional
  cases.push_back(torch::full({1000}, 3e38f));                  // near float's limit
  cases.push_back(torch::tensor({NAN}));                        // NaN alone, first, in the tail
  cases.push_back(torch::cat({torch::tensor({NAN}), torch::randn({40})}));
  cases.push_back(torch::cat({torch::randn({40}), torch::tensor({NAN, 1.0f})}));
  cases.push_back(torch::cat({torch::randn({16}), torch::tensor({-INFINITY, NAN})}));
  // More than 2^24 values: the count is no longer exact as a float divisor.
  cases.push_back(torch::rand({(1 << 24) + 3}) + 0.5);
  int compared = 0;
  for (const auto& t : cases) {
    DOCTEST_INFO("numel " << t.numel() << ", first " << t.flatten()[0].item<float>());
    DOCTEST_CHECK(fast(t) == general(t));
    ++compared;
  }
  DOCTEST_CHECK(compared == 614);
  // Non-contiguous, float16 and empty tensors take the general path, as before.
  const auto transposed = torch::randn({8, 5}).t();
  DOCTEST_CHECK(fast(transposed) == general(transposed));
  boost::json::object empty;
  tracetorch::detail::add_statistics(empty, torch::empty({0}));
  DOCTEST_CHECK(empty.contains("mean"));
  DOCTEST_CHECK(!empty.contains("min"));
}
