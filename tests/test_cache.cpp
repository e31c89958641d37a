// tracetorch/cache.hpp: transformers' DynamicCache and its repr.

#include <doctest/doctest.h>

#include <tracetorch/cache.hpp>
#include <tracetorch/python_repr.hpp>

DOCTEST_TEST_CASE("cache: update appends along the sequence and returns the keys and values so far") {
  tracetorch::DynamicCache cache(2);  // upstream: DynamicCache(config=config) for two full-attention layers
  DOCTEST_CHECK(cache.size() == 2);
  DOCTEST_CHECK(cache.get_seq_length() == 0);
  const auto k1 = torch::randn({1, 2, 3, 4}), v1 = torch::randn({1, 2, 3, 4});
  const auto [keys, values] = cache.update(k1, v1, 0);
  DOCTEST_CHECK(torch::equal(keys, k1));
  DOCTEST_CHECK(torch::equal(values, v1));
  const auto k2 = torch::randn({1, 2, 1, 4}), v2 = torch::randn({1, 2, 1, 4});
  const auto [more_keys, more_values] = cache.update(k2, v2, 0);
  DOCTEST_CHECK(more_keys.sizes() == torch::IntArrayRef({1, 2, 4, 4}));
  DOCTEST_CHECK(torch::equal(more_keys, torch::cat({k1, k2}, -2)));
  DOCTEST_CHECK(torch::equal(more_values, torch::cat({v1, v2}, -2)));
  DOCTEST_CHECK(cache.get_seq_length(0) == 4);
  DOCTEST_CHECK(cache.get_seq_length(1) == 0);  // not filled yet
  DOCTEST_CHECK(cache.get_seq_length(7) == 0);  // no such layer
  DOCTEST_CHECK(torch::equal(cache.keys(0), more_keys));
  DOCTEST_CHECK_FALSE(cache.values(1).defined());
}

DOCTEST_TEST_CASE("cache: an empty cache grows to the layers updated, and refuses negative indices") {
  tracetorch::DynamicCache cache;  // upstream's DynamicCache() of the v4.49 era
  DOCTEST_CHECK(cache.size() == 0);
  cache.update(torch::zeros({1, 1, 2, 2}), torch::zeros({1, 1, 2, 2}), 2);
  DOCTEST_CHECK(cache.size() == 3);
  DOCTEST_CHECK(cache.get_seq_length(2) == 2);
  DOCTEST_CHECK_THROWS_AS(cache.update(torch::zeros({1}), torch::zeros({1}), -1), tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(tracetorch::DynamicCache(-1), tracetorch::Error);
  DOCTEST_CHECK_THROWS_AS(cache.keys(3), std::out_of_range);
}

DOCTEST_TEST_CASE("cache: a trace records the cache by upstream's v4.57 repr, one DynamicLayer a layer") {
  DOCTEST_CHECK(tracetorch_repr(tracetorch::DynamicCache()) == "DynamicCache(layers=[])");
  DOCTEST_CHECK(tracetorch_repr(tracetorch::DynamicCache(3)) == "DynamicCache(layers=[DynamicLayer, DynamicLayer, DynamicLayer])");
}

DOCTEST_TEST_CASE("cache: a sliding layer keeps the last window - 1 tokens, counts all it saw, and sizes its masks as upstream") {
  tracetorch::DynamicCache cache({3, std::nullopt});  // DynamicCache(config=...): a sliding layer, window 3, then a full one
  DOCTEST_CHECK(tracetorch_repr(cache) == "DynamicCache(layers=[DynamicSlidingWindowLayer, DynamicLayer])");
  DOCTEST_CHECK(cache.sliding_window(0) == 3);
  DOCTEST_CHECK(!cache.sliding_window(1));
  // Before any token: (kv_length, kv_offset) = (query, 0) for both kinds.
  DOCTEST_CHECK(cache.get_mask_sizes(4, 0) == std::pair<std::int64_t, std::int64_t>{4, 0});
  const auto k1 = torch::randn({1, 2, 4, 8}), v1 = torch::randn({1, 2, 4, 8});
  // The step's full states come back; the layer keeps the last 2 (upstream: full[:, :, -window + 1:]).
  const auto [keys, values] = cache.update(k1, v1, 0);
  DOCTEST_CHECK(torch::equal(keys, k1));
  DOCTEST_CHECK(torch::equal(values, v1));
  DOCTEST_CHECK(torch::equal(cache.keys(0), k1.slice(2, 2)));
  DOCTEST_CHECK(torch::equal(cache.values(0), v1.slice(2, 2)));
  DOCTEST_CHECK(cache.get_seq_length(0) == 4);  // upstream's cumulative_length
  cache.update(k1, v1, 1);
  DOCTEST_CHECK(cache.keys(1).size(2) == 4);
  // One more token: the sliding layer's mask covers its 2 kept keys and the new one, from key 2;
  // the full layer's every key from 0.
  DOCTEST_CHECK(cache.get_mask_sizes(1, 0) == std::pair<std::int64_t, std::int64_t>{3, 2});
  DOCTEST_CHECK(cache.get_mask_sizes(1, 1) == std::pair<std::int64_t, std::int64_t>{5, 0});
  const auto k2 = torch::randn({1, 2, 1, 8}), v2 = torch::randn({1, 2, 1, 8});
  const auto [window_keys, window_values] = cache.update(k2, v2, 0);
  DOCTEST_CHECK(torch::equal(window_keys, torch::cat({k1.slice(2, 2), k2}, 2)));
  DOCTEST_CHECK(torch::equal(window_values, torch::cat({v1.slice(2, 2), v2}, 2)));
  DOCTEST_CHECK(cache.get_seq_length(0) == 5);
  DOCTEST_CHECK(cache.keys(0).size(2) == 2);
  // Fewer tokens seen than the window: all of them, offset 0.
  tracetorch::DynamicCache short_seen({8});
  short_seen.update(k1, v1, 0);
  DOCTEST_CHECK(short_seen.get_mask_sizes(2, 0) == std::pair<std::int64_t, std::int64_t>{6, 0});
  // A window of 1 keeps every token, as Python's [-0:] slice does.
  tracetorch::DynamicCache one({1});
  one.update(k1, v1, 0);
  DOCTEST_CHECK(one.keys(0).size(2) == 4);
  DOCTEST_CHECK_THROWS_AS(tracetorch::DynamicCache(std::vector<std::optional<std::int64_t>>{0}), tracetorch::Error);
}
