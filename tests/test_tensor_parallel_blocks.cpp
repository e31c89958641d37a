// tracetorch/nn/parallel.hpp: the parallel linears' slices, their load from an ordinary
// checkpoint, and their refusals. (Their all-reduce runs across processes in
// test_tensor_parallel_llama.cpp.)

#include <doctest/doctest.h>

#include "test_helpers.hpp"

#ifdef TRACETORCH_TEST_C10D

#include <tracetorch/nn/parallel.hpp>

#include "llama_tp/llama_tp.hpp"

namespace tensor_parallel_blocks_test {

tracetorch::nn::TensorParallel rank_of(int rank, int world_size) { return {rank, world_size, {}}; }

}  // namespace tensor_parallel_blocks_test

namespace tpb = tensor_parallel_blocks_test;

DOCTEST_TEST_SUITE("tensor-parallel blocks") {

DOCTEST_TEST_CASE("ColwiseLinear holds its rows of the full layer and outputs its features") {
  torch::manual_seed(5);
  torch::nn::Linear full(torch::nn::LinearOptions(6, 8));
  torch::manual_seed(5);
  tracetorch::nn::ColwiseLinear colwise(torch::nn::LinearOptions(6, 8), tpb::rank_of(1, 2));
  DOCTEST_CHECK(colwise->weight.sizes() == torch::IntArrayRef({4, 6}));
  DOCTEST_CHECK(colwise->shard == tracetorch::nn::ShardSpec{4, 4, 8});
  DOCTEST_CHECK(torch::equal(colwise->weight, full->weight.narrow(0, 4, 4)));
  DOCTEST_CHECK(torch::equal(colwise->bias, full->bias.narrow(0, 4, 4)));
  const auto x = torch::randn({3, 6});
  DOCTEST_CHECK(torch::allclose(colwise(x), full(x).narrow(1, 4, 4)));
}

DOCTEST_TEST_CASE("RowwiseLinear holds its columns and the whole bias; alone it is the full layer") {
  torch::manual_seed(6);
  torch::nn::Linear full(torch::nn::LinearOptions(8, 3));
  torch::manual_seed(6);
  tracetorch::nn::RowwiseLinear row(torch::nn::LinearOptions(8, 3), tpb::rank_of(0, 2));
  DOCTEST_CHECK(row->weight.sizes() == torch::IntArrayRef({3, 4}));
  DOCTEST_CHECK(torch::equal(row->weight, full->weight.narrow(1, 0, 4)));
  DOCTEST_CHECK(torch::equal(row->bias, full->bias));
  // Two ranks without a group: the partial sums could not be reduced, so the forward refuses.
  DOCTEST_CHECK_THROWS_WITH_AS(row(torch::randn({2, 4})), doctest::Contains("no process group"), tracetorch::Error);
  torch::manual_seed(6);
  tracetorch::nn::RowwiseLinear alone(torch::nn::LinearOptions(8, 3), tpb::rank_of(0, 1));
  const auto x = torch::randn({2, 8});
  DOCTEST_CHECK(torch::allclose(alone(x), full(x)));
}

DOCTEST_TEST_CASE("a split that does not divide, or a slice out of range, is refused naming the sizes") {
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::ColwiseLinear(torch::nn::LinearOptions(4, 6), tpb::rank_of(0, 4)),
                               "ColwiseLinear: out_features is 6, which does not divide by the world size 4", tracetorch::Error);
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::nn::RowwiseLinear(torch::nn::LinearOptions(8, 2), tpb::rank_of(1, 2), 6),
                               "RowwiseLinear: in_features: a slice of 4 at offset 6 does not fit in 8", tracetorch::Error);
}

DOCTEST_TEST_CASE("load_sharded: each rank takes its slice of an ordinary checkpoint, checked at full shape") {
  auto config = llama_tp::LlamaConfig::from_json_file(tracetorch_test::tiny_llama_dir() / "config.json");
  config.parallel = tpb::rank_of(1, 2);
  llama_tp::LlamaModel model(config);
  tracetorch::nn::load_sharded(*model, tracetorch_test::tiny_llama_dir() / "model.safetensors");
  const auto full = tracetorch::safetensors::load(tracetorch_test::tiny_llama_dir() / "model.safetensors");
  const auto params = model->named_parameters();
  DOCTEST_CHECK(torch::equal(params["layers.0.self_attn.q_proj.weight"], full.at("layers.0.self_attn.q_proj.weight").narrow(0, 32, 32)));
  DOCTEST_CHECK(torch::equal(params["layers.0.self_attn.k_proj.weight"], full.at("layers.0.self_attn.k_proj.weight").narrow(0, 16, 16)));
  DOCTEST_CHECK(torch::equal(params["layers.2.self_attn.o_proj.weight"], full.at("layers.2.self_attn.o_proj.weight").narrow(1, 32, 32)));
  DOCTEST_CHECK(torch::equal(params["layers.3.mlp.down_proj.weight"], full.at("layers.3.mlp.down_proj.weight").narrow(1, 86, 86)));
  DOCTEST_CHECK(torch::equal(params["norm.weight"], full.at("norm.weight")));
  // The layout a rank's trace records: q_proj colwise at [32, 64) of 64, o_proj rowwise.
  const auto layout = tracetorch::nn::parallel_layout(*model, "LlamaModel");
  DOCTEST_CHECK(layout.size() == 4 * 7);
  bool found = false;
  for (const auto& shard : layout) {
    if (shard.module_path != "LlamaModel.layers.1.self_attn.q_proj") continue;
    found = true;
    DOCTEST_CHECK(shard.style == tracetorch::nn::ParallelStyle::colwise);
    DOCTEST_CHECK(shard.features == tracetorch::nn::ShardSpec{32, 32, 64});
  }
  DOCTEST_CHECK(found);
  // A config that does not divide by the world size is refused with its sizes.
  config.parallel = tpb::rank_of(0, 4);
  DOCTEST_CHECK_THROWS_WITH_AS(llama_tp::LlamaModel{config}, doctest::Contains("num_key_value_heads 2 not divisible by the world size 4"),
                               tracetorch::Error);
}

}  // DOCTEST_TEST_SUITE

#endif  // TRACETORCH_TEST_C10D
