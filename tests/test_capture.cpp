// tracetorch/capture.hpp: capture_outputs and merge_with_config_defaults on toy models, the
// Llama fixture; threads and nested models each collecting their own values.

#include <doctest/doctest.h>
#include <tracetorch/tracetorch.hpp>

#include <atomic>
#include <thread>

#include "capture_toys.hpp"

DOCTEST_TEST_SUITE("capture") {

DOCTEST_TEST_CASE("hidden_states start with the first layer's input and end with last_hidden_state") {
  torch::manual_seed(1);
  ToyModel model(3, 4);
  const auto x = torch::randn({2, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  const auto expected = manual_hidden_states(model, x);
  DOCTEST_REQUIRE(out.hidden_states.has_value());
  DOCTEST_REQUIRE(out.hidden_states->size() == 4);  // layers + 1
  DOCTEST_CHECK(same((*out.hidden_states)[0], expected[0]));  // the input of the first recorded layer
  DOCTEST_CHECK(same((*out.hidden_states)[1], expected[1]));
  DOCTEST_CHECK(same((*out.hidden_states)[2], expected[2]));
  DOCTEST_CHECK(same((*out.hidden_states)[3], out.last_hidden_state));  // tied to the final, "normed" state
  DOCTEST_CHECK_FALSE(out.attentions.has_value());                      // not asked for: None

  model->settings.tie_last_hidden_states = false;
  const auto untied = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_CHECK(same((*untied.hidden_states)[3], expected[3]));
}

DOCTEST_TEST_CASE("attentions take element 1 of each attention call - None weights are skipped") {
  torch::manual_seed(2);
  ToyModel model(2, 4);
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(out.attentions.has_value());
  DOCTEST_REQUIRE(out.attentions->size() == 2);
  DOCTEST_CHECK(same((*out.attentions)[0], torch::softmax(x, -1)));
  DOCTEST_CHECK_FALSE(out.hidden_states.has_value());

  ToyModel without_weights(2, 4, /*with_weights=*/false);
  const auto none = without_weights(x, tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(none.attentions.has_value());
  DOCTEST_CHECK(none.attentions->empty());
}

DOCTEST_TEST_CASE("nothing requested: nothing is attached while the forward runs") {
  ToyModel model(2, 4);
  int attached_during_forward = -1;
  model->probe = [&](ToyModelTImpl<ToyAttn>& self) {
    attached_during_forward = 0;
    for (const auto& module : self.modules(/*include_self=*/false)) {
      if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
        attached_during_forward += traced->attachments_.load() != nullptr ? 1 : 0;
      }
    }
  };
  model(torch::randn({1, 4}));
  DOCTEST_CHECK(attached_during_forward == 0);
  model(torch::randn({1, 4}), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_CHECK(attached_during_forward == 2);  // the two attention modules, nothing else
  // And afterwards nothing is left attached.
  model->probe = nullptr;
  for (const auto& module : model->modules()) {
    if (auto* traced = dynamic_cast<tracetorch::detail::TracedModuleBase*>(module.get())) {
      DOCTEST_CHECK(traced->attachments_.load() == nullptr);
    }
  }
}

DOCTEST_TEST_CASE("sparse hidden_states: full length, undefined where not requested") {
  torch::manual_seed(3);
  ToyModel model(4, 4);
  const auto x = torch::randn({2, 4});
  const auto all = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  const auto some = model(x, tracetorch::OutputOptions{.output_hidden_states = tracetorch::layers{1, 3}});
  DOCTEST_REQUIRE(some.hidden_states->size() == all.hidden_states->size());
  for (std::size_t i = 0; i < all.hidden_states->size(); ++i) {
    DOCTEST_INFO("position ", i);
    if (i == 1 || i == 3) {
      DOCTEST_CHECK(same((*some.hidden_states)[i], (*all.hidden_states)[i]));
    } else {
      DOCTEST_CHECK_FALSE((*some.hidden_states)[i].defined());
    }
  }
  const auto last = model(x, tracetorch::OutputOptions{.output_hidden_states = tracetorch::layers{4}});
  DOCTEST_CHECK(same(last.hidden_states->back(), last.last_hidden_state));
  DOCTEST_CHECK_THROWS_WITH_AS(tracetorch::LayerSelection(tracetorch::layers{-1}),
                               doctest::Contains("negative"), tracetorch::Error);
}

DOCTEST_TEST_CASE("merge_with_config_defaults takes use_cache from the config unless given") {
  ToyModel model(1, 4);
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {}).use_cache == true);
  model->config.use_cache = false;
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {}).use_cache == false);
  DOCTEST_CHECK(tracetorch::merge_with_config_defaults(*model, {.use_cache = true}).use_cache == true);
}

DOCTEST_TEST_CASE("two threads capturing two models each get their own values") {
  torch::manual_seed(4);
  ToyModel first(3, 8), second(3, 8);
  const auto x1 = torch::randn({2, 8});
  const auto x2 = torch::randn({2, 8});
  const auto expected1 = manual_hidden_states(first, x1);
  const auto expected2 = manual_hidden_states(second, x2);
  std::atomic<int> wrong{0};
  const auto run = [&](ToyModel& model, const torch::Tensor& x, const std::vector<torch::Tensor>& expected) {
    for (int i = 0; i < 30; ++i) {
      const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
      if (out.hidden_states->size() != 4 || out.attentions->size() != 3 || !same((*out.hidden_states)[1], expected[1]) ||
          !same((*out.hidden_states)[2], expected[2])) {
        ++wrong;
      }
    }
  };
  std::thread a(run, std::ref(first), x1, expected1);
  std::thread b(run, std::ref(second), x2, expected2);
  a.join();
  b.join();
  DOCTEST_CHECK(wrong.load() == 0);
}

DOCTEST_TEST_CASE("one model shared by a capturing thread and a plain one: each call sees only its own") {
  // Each capturing call attaches to the layers and frees its attachments when it returns, while
  // the other thread's calls walk the same modules' lists (run under ASan in CI).
  torch::manual_seed(5);
  ToyModel model(3, 8);
  const auto x = torch::randn({2, 8});
  const auto expected = manual_hidden_states(model, x);
  const auto plain_expected = model(x).last_hidden_state;
  std::atomic<int> wrong{0};
  std::thread capturing([&] {
    for (int i = 0; i < 300; ++i) {
      const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
      if (!out.hidden_states || out.hidden_states->size() != 4 || !out.attentions || out.attentions->size() != 3 ||
          !same((*out.hidden_states)[1], expected[1]) || !same((*out.hidden_states)[2], expected[2])) {
        ++wrong;
      }
    }
  });
  std::thread plain([&] {
    for (int i = 0; i < 300; ++i) {
      const auto out = model(x);
      if (out.hidden_states.has_value() || out.attentions.has_value() || !same(out.last_hidden_state, plain_expected)) {
        ++wrong;
      }
    }
  });
  capturing.join();
  plain.join();
  DOCTEST_CHECK(wrong.load() == 0);
}

DOCTEST_TEST_CASE("nested models each collect their own values") {
  Wrapper wrapper;
  const auto out = wrapper(torch::randn({1, 4}), tracetorch::OutputOptions{.output_attentions = true});
  DOCTEST_REQUIRE(wrapper->inner_output.attentions.has_value());
  DOCTEST_CHECK(wrapper->inner_output.attentions->size() == 2);  // the inner model's own two
  DOCTEST_REQUIRE(out.attentions.has_value());
  // Upstream's recorders stop at a sub-model that captures for itself: the outer one sees its own only.
  DOCTEST_REQUIRE(out.attentions->size() == 1);
  DOCTEST_CHECK(torch::equal((*out.attentions)[0], torch::softmax(wrapper->inner_output.last_hidden_state, -1)));
}

DOCTEST_TEST_CASE("a model with no layers: hidden_states is (last_hidden_state,)") {
  ToyModel empty(0, 4);
  const auto x = torch::randn({1, 4});
  const auto out = empty(x, tracetorch::OutputOptions{.output_hidden_states = true, .output_attentions = true});
  DOCTEST_REQUIRE(out.hidden_states->size() == 1);
  DOCTEST_CHECK(torch::equal(out.hidden_states->front(), out.last_hidden_state));
  DOCTEST_CHECK(out.attentions->empty());
}

DOCTEST_TEST_CASE("an output with vision_hidden_states ties the last hidden state to it") {
  VisionToy model;
  const auto x = torch::randn({1, 4});
  const auto out = model(x, tracetorch::OutputOptions{.output_hidden_states = true});
  DOCTEST_REQUIRE(out.hidden_states->size() == 3);
  DOCTEST_CHECK(torch::equal(out.hidden_states->back(), out.vision_hidden_states));
  DOCTEST_CHECK_FALSE(torch::equal(out.hidden_states->back(), out.last_hidden_state));
}

DOCTEST_TEST_CASE("recorder modules that never ran through their traced forward: an error, not an empty capture") {
  ImplCallingToy model;
  const auto x = torch::randn({1, 4});
  DOCTEST_CHECK_THROWS_WITH_AS(model(x, tracetorch::OutputOptions{.output_hidden_states = true}),
                               doctest::Contains("none ran through its traced forward"), tracetorch::Error);
  DOCTEST_CHECK_NOTHROW(model(x));  // nothing requested: nothing checked
}

DOCTEST_TEST_CASE("the Llama fixture: hidden_states[i] is the input of layers.i, the last is norm's output") {
  const auto config = llama::LlamaConfig::from_json_file(tiny_llama_dir() / "config.json");
  llama::LlamaModel model(config);
  model->eval();
  llama::load_state_dict(*model, tiny_llama_dir() / "model.safetensors");
  const auto ids = tracetorch::safetensors::load_single(tiny_llama_dir() / "input_ids.safetensors", "input_ids");
  const auto out = model({.input_ids = ids}, {.output_hidden_states = true, .output_attentions = true});
  const auto ref = tiny_llama_dir() / "trace_st";
  DOCTEST_REQUIRE(out.hidden_states->size() == static_cast<std::size_t>(config.num_hidden_layers + 1));
  for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) {
    DOCTEST_INFO("layer ", i);
    const auto expected =
        tracetorch::safetensors::load_single(ref / ("LlamaModel.layers." + std::to_string(i) + "_inputs_args_0.safetensors"));
    DOCTEST_CHECK(torch::allclose((*out.hidden_states)[i], expected, 0, 1e-5));
  }
  const auto norm = tracetorch::safetensors::load_single(ref / "LlamaModel.norm_outputs.safetensors");
  DOCTEST_CHECK(torch::allclose(out.hidden_states->back(), norm, 0, 1e-5));
  DOCTEST_REQUIRE(out.attentions->size() == static_cast<std::size_t>(config.num_hidden_layers));
  for (const auto& weights : *out.attentions) {
    DOCTEST_CHECK((weights.sizes() == c10::IntArrayRef{ids.size(0), config.num_attention_heads, ids.size(1), ids.size(1)}));
    DOCTEST_CHECK(torch::allclose(weights.sum(-1), torch::ones({1})));        // rows are distributions
    DOCTEST_CHECK(weights.triu(1).abs().max().item<float>() == 0.0f);          // causal
  }
  // Capture leaves the result unchanged.
  DOCTEST_CHECK(torch::equal(model({.input_ids = ids}).last_hidden_state, out.last_hidden_state));
}

}  // DOCTEST_TEST_SUITE
