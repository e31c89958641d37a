// include/tracetorch/detail/diff/compare.hpp: judging aligned values, on values built in
// memory (printed tensors and other values, no file): tolerances, error statistics, dtypes
// compared across, and the status each kind of difference gets.

#include <doctest/doctest.h>

#include <tracetorch/detail/diff/compare.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

using tracetorch::DiffStatus;
using tracetorch::TensorDiff;
using tracetorch::detail::AlignedValue;
using tracetorch::detail::ErrorAccumulator;
using tracetorch::detail::Tolerance;
using tracetorch::detail::Trace;
using tracetorch::detail::TraceSlot;

constexpr Tolerance kDefault{1e-5, 1e-4, true};

/// A printed tensor of shape [n] (n: the numbers in `values`), as a use_repr=true trace records it.
TraceSlot printed_slot(const std::string& values, std::size_t n = 2, const std::string& dtype = "torch.float32") {
  TraceSlot slot;
  slot.location = "outputs";
  slot.is_tensor = true;
  slot.shape = {static_cast<std::int64_t>(n)};
  slot.dtype = dtype;
  slot.lines = {"tensor([" + values + "])"};
  return slot;
}

/// Another value (None, a number, a repr), by its JSON text.
TraceSlot other(const std::string& text) {
  TraceSlot slot;
  slot.location = "outputs";
  slot.text = text;
  return slot;
}

/// Two one-call traces' worth of context: the file names errors are reported against.
struct Traces {
  Trace ref, cand;
  Traces() {
    ref.json_file = "ref.json";
    cand.json_file = "cand.json";
  }

  /// Judges the pair (either side may be null: a value on one side only).
  TensorDiff compare(const TraceSlot* r, const TraceSlot* c, const Tolerance& tolerance = kDefault) {
    AlignedValue value{{0, 0}, {}, r, c};
    value.diff.module_path = "M";
    value.diff.location = "outputs";
    if (r == nullptr) value.diff.status = DiffStatus::only_in_candidate;
    if (c == nullptr) value.diff.status = DiffStatus::only_in_reference;
    return tracetorch::detail::compare_value(ref, cand, value, tolerance);
  }
};

}  // namespace

DOCTEST_TEST_SUITE("trace compare") {

DOCTEST_TEST_CASE("one pair's error statistics: tolerance, relative error, NaN and infinities, cosine") {
  ErrorAccumulator acc{0.1, 0.0};
  acc.add(1.05, 1.0);  // within: |a - b| = 0.05 <= 0.1
  DOCTEST_CHECK(acc.out_of_tolerance == 0);
  DOCTEST_CHECK(acc.max_abs == doctest::Approx(0.05));
  DOCTEST_CHECK(acc.ratio == doctest::Approx(0.5));
  acc.add(3.0, 1.0);  // beyond
  acc.add(std::nan(""), std::nan(""));  // NaN agrees with NaN
  acc.add(HUGE_VAL, HUGE_VAL);          // and inf with the same inf
  acc.add(0.5, 0.0);                    // b = 0: relative error infinite
  DOCTEST_CHECK(acc.compared == 5);
  DOCTEST_CHECK(acc.out_of_tolerance == 2);
  DOCTEST_CHECK(acc.max_abs == doctest::Approx(2.0));
  DOCTEST_CHECK(std::isinf(acc.max_rel));
  TensorDiff out;
  acc.store(out);
  DOCTEST_CHECK(out.status == DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(out.tolerance_ratio == doctest::Approx(20.0));

  // A NaN against a number: out of tolerance, and the errors say NaN rather than a number.
  ErrorAccumulator nan{1.0, 1.0};
  nan.add(std::nan(""), 1.0);
  nan.store(out);
  DOCTEST_CHECK(out.out_of_tolerance == 1);
  DOCTEST_CHECK(std::isnan(out.max_abs_error));
  // The slack of printed values widens each element's tolerance.
  ErrorAccumulator exact{0.0, 0.0};
  exact.add(1.0, 1.001, 0.001);
  DOCTEST_CHECK(exact.out_of_tolerance == 0);
  exact.add(1.0, 1.001);
  DOCTEST_CHECK(exact.out_of_tolerance == 1);

  ErrorAccumulator cosine{0.0, 0.0};
  DOCTEST_CHECK(cosine.cosine() == 1.0);  // two zero vectors
  cosine.add_vector_terms(1.0, 0.0);
  cosine.add_vector_terms(0.0, 1.0);
  cosine.add_vector_terms(-HUGE_VAL, -HUGE_VAL);  // a mask's -inf: left out
  DOCTEST_CHECK(cosine.cosine() == 0.0);
}

DOCTEST_TEST_CASE("tensors element by element, in slices, complex as real pairs") {
  ErrorAccumulator acc{1e-5, 1e-4};
  tracetorch::detail::compare_tensors(torch::tensor({1.0f, 2.5f}), torch::tensor({1.0, 2.0}), acc);
  DOCTEST_CHECK((acc.compared == 2 && acc.out_of_tolerance == 1));
  DOCTEST_CHECK(acc.max_abs == doctest::Approx(0.5));

  // More elements than one slice holds: the last one, in the second slice, is still compared.
  const std::int64_t n = (std::int64_t(1) << 20) + 3;
  auto a = torch::zeros({n});
  a[n - 1] = 1.0f;
  ErrorAccumulator big{1e-5, 1e-4};
  tracetorch::detail::compare_tensors(a, torch::zeros({n}), big);
  DOCTEST_CHECK(big.compared == n);
  DOCTEST_CHECK(big.out_of_tolerance == 1);

  ErrorAccumulator complex{1e-5, 1e-4};
  tracetorch::detail::compare_tensors(torch::complex(torch::tensor({1.0f}), torch::tensor({2.0f})),
                                      torch::complex(torch::tensor({1.0f}), torch::tensor({3.0f})), complex);
  DOCTEST_CHECK((complex.compared == 2 && complex.out_of_tolerance == 1));
}

DOCTEST_TEST_CASE("dtypes: bf16/fp16 compared across at twice their epsilon, fp32 against fp64 not") {
  using tracetorch::detail::comparable_across_dtypes;
  using tracetorch::detail::pair_tolerance;
  DOCTEST_CHECK(comparable_across_dtypes("torch.bfloat16", "torch.float32"));
  DOCTEST_CHECK(comparable_across_dtypes("torch.float64", "torch.float16"));
  DOCTEST_CHECK(!comparable_across_dtypes("torch.float32", "torch.float64"));
  DOCTEST_CHECK(!comparable_across_dtypes("torch.int64", "torch.bfloat16"));
  DOCTEST_CHECK((pair_tolerance("torch.bfloat16", "torch.float32", kDefault) == std::pair{0x1p-6, 0x1p-6}));
  DOCTEST_CHECK((pair_tolerance("torch.float32", "torch.float16", kDefault) == std::pair{0x1p-9, 0x1p-9}));
  DOCTEST_CHECK((pair_tolerance("torch.float32", "torch.float32", kDefault) == std::pair{1e-5, 1e-4}));
  DOCTEST_CHECK((pair_tolerance("torch.bfloat16", "torch.float32", {1e-5, 1e-4, false}) == std::pair{1e-5, 1e-4}));
  DOCTEST_CHECK((pair_tolerance("torch.bfloat16", "torch.float32", {0.5, 0.25, true}) == std::pair{0.5, 0.25}));
}

DOCTEST_TEST_CASE("each kind of pair gets its status, and both sides are described") {
  Traces traces;
  const auto none = other("\"None\"");
  DOCTEST_CHECK(traces.compare(&none, &none).status == DiffStatus::within_tolerance);
  const auto three = other("3"), four = other("4");
  auto d = traces.compare(&three, &four);
  DOCTEST_CHECK(d.status == DiffStatus::value_mismatch);
  DOCTEST_CHECK((d.reference_shape == "3" && d.candidate_shape == "4"));

  const auto x = printed_slot("1.0000e+00, 2.0000e+00");
  d = traces.compare(&x, &none);
  DOCTEST_CHECK(d.status == DiffStatus::structure_mismatch);
  DOCTEST_CHECK(d.is_tensor);
  const auto longer = printed_slot("1.0000e+00, 2.0000e+00, 3.0000e+00", 3);
  d = traces.compare(&x, &longer);
  DOCTEST_CHECK(d.status == DiffStatus::shape_mismatch);
  DOCTEST_CHECK((d.reference_shape == "[2]" && d.candidate_shape == "[3]"));
  const auto doubles = printed_slot("1.0000e+00, 2.0000e+00", 2, "torch.float64");
  d = traces.compare(&x, &doubles);
  DOCTEST_CHECK(d.status == DiffStatus::dtype_mismatch);
  DOCTEST_CHECK(d.compared == 0);

  // On one side only: described, status kept.
  d = traces.compare(&x, nullptr);
  DOCTEST_CHECK(d.status == DiffStatus::only_in_reference);
  DOCTEST_CHECK((d.reference_shape == "[2]" && d.reference_dtype == "torch.float32" && d.candidate_shape.empty()));
}

DOCTEST_TEST_CASE("printed values: within their printed precision, statistics within one dtype, another layout") {
  Traces traces;
  const auto x = printed_slot("1.0000e+00, 2.0000e+00");
  const auto close = printed_slot("1.0000e+00, 2.0001e+00");
  auto d = traces.compare(&x, &close);
  DOCTEST_CHECK(d.status == DiffStatus::within_tolerance);
  DOCTEST_CHECK((d.printed && d.compared == 2));
  DOCTEST_CHECK((d.atol == 1e-5 && d.rtol == 1e-4));
  const auto far = printed_slot("1.0000e+00, 2.5000e+00");
  d = traces.compare(&x, &far);
  DOCTEST_CHECK(d.status == DiffStatus::out_of_tolerance);
  DOCTEST_CHECK(d.out_of_tolerance == 1);
  DOCTEST_CHECK(d.max_abs_error == doctest::Approx(0.5));

  // The statistics lines are compared too, where both are of one dtype.
  auto ref_stats = x, cand_stats = x;
  ref_stats.stats["mean"] = "tensor(1.5000)";
  cand_stats.stats["mean"] = "tensor(2.0000)";
  d = traces.compare(&ref_stats, &cand_stats);
  DOCTEST_CHECK((d.compared == 3 && d.out_of_tolerance == 1));
  // A bf16 reference: its numbers against fp32's at bf16's tolerance, its statistics not.
  auto bf16 = printed_slot("1., 2.], dtype=torch.bfloat16)", 2, "torch.bfloat16");
  bf16.lines = {"tensor([1., 2.], dtype=torch.bfloat16)"};
  bf16.stats["mean"] = "tensor(1.5000, dtype=torch.bfloat16)";
  d = traces.compare(&bf16, &cand_stats);
  DOCTEST_CHECK(d.status == DiffStatus::within_tolerance);
  DOCTEST_CHECK((d.compared == 2 && d.across_dtypes() && d.atol == 0x1p-6));

  // Same shape, another number of printed values: another print layout.
  const auto three = printed_slot("1.0000e+00, 2.0000e+00, 3.0000e+00");
  DOCTEST_CHECK(traces.compare(&x, &three).status == DiffStatus::structure_mismatch);
  // Not a printed tensor at all: refused, naming the trace and the value.
  auto garbage = x;
  garbage.lines = {"not a tensor"};
  DOCTEST_CHECK_THROWS_WITH_AS(traces.compare(&x, &garbage), doctest::Contains("cand.json: M outputs: value is not a printed tensor"),
                               tracetorch::Error);
}

DOCTEST_TEST_CASE("aligned values are compared in order, progress after each") {
  Traces traces;
  const auto x = printed_slot("1.0000e+00, 2.0000e+00");
  const auto y = printed_slot("1.0000e+00, 3.0000e+00");
  std::vector<AlignedValue> values(3);
  values[0] = {{0, 0}, {}, &x, &x};
  values[1] = {{1, 0}, {}, &x, &y};
  values[2] = {{2, 0}, {}, &y, &y};
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  const auto out = tracetorch::detail::compare_aligned(traces.ref, traces.cand, values, kDefault,
                                                       [&](std::size_t done, std::size_t total) { calls.emplace_back(done, total); });
  DOCTEST_REQUIRE(out.size() == 3);
  DOCTEST_CHECK(out[1].status == DiffStatus::out_of_tolerance);
  DOCTEST_CHECK((out[0].status == DiffStatus::within_tolerance && out[2].status == DiffStatus::within_tolerance));
  DOCTEST_CHECK((calls == std::vector<std::pair<std::size_t, std::size_t>>{{1, 3}, {2, 3}, {3, 3}}));
  // No progress callback: the same results.
  DOCTEST_CHECK(tracetorch::detail::compare_aligned(traces.ref, traces.cand, values, kDefault, {}).size() == 3);
}

}  // DOCTEST_TEST_SUITE
