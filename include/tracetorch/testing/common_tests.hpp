#pragma once
/// \file
/// The names of the common model tests and the skip-list entry type, without doctest or
/// LibTorch: `tracetorch/testing.hpp` runs these tests, `tracetorch-scan-skipped` counts
/// which models skip them.
///
/// \code
/// struct MyModelTester {
///   static constexpr tracetorch::testing::Skip skipped_tests[] = {
///       {"test_inputs_embeds_matches_input_ids", "a vision model: pixel_values in, no input_ids"}};
///   ...
/// };
/// \endcode

#include "tracetorch/testing/common_test_names.hpp"
