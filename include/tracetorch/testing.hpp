#pragma once
/// \file
/// The common model tests: transformers' test_modeling_common for LibTorch models. A model's
/// test file declares a tester (a small config, the model, its inputs, the sizes to expect and
/// the common tests it skips, with reasons) and instantiates the suite for it:
///
/// \code
/// #include <doctest/doctest.h>
/// #include <tracetorch/testing.hpp>
///
/// struct LlamaModelTester {
///   static constexpr const char* model_name = "LlamaModel";
///   static constexpr tracetorch::testing::Skip skipped_tests[] = {
///       {"test_cross_attention_outputs", "decoder-only: there is no encoder to attend to"}};
///   llama::LlamaConfig config{.vocab_size = 99, .hidden_size = 32, ...};
///   llama::LlamaModel make_model() const { return llama::LlamaModel(config); }
///   tracetorch::testing::Inputs make_inputs() const { return {{"input_ids", torch::randint(99, {2, 7})}}; }
///   tracetorch::testing::ExpectedSizes sizes() const { return {.batch_size = 2, .seq_length = 7, ...}; }
///   auto forward(llama::LlamaModel& model, const tracetorch::testing::Inputs& inputs,
///                const tracetorch::OutputOptions& options) const {
///     return model->forward(inputs.at("input_ids"), options);
///   }
/// };
/// TRACETORCH_COMMON_MODEL_TESTS(LlamaModelTester);   // doctest cases "LlamaModel: test_..."
/// \endcode
///
/// A test that needs something the model lacks (an inputs_embeds path, cross-attention) does
/// not compile for it unless the skip list names it: a skip is always declared, with a reason,
/// never a silent pass. `tracetorch-scan-skipped` reads the skip lists from the source text.
///
/// Not included by <tracetorch/tracetorch.hpp>: it needs doctest.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <boost/json.hpp>
#include <boost/pfr.hpp>

#include <concepts>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/capture.hpp"
#include "tracetorch/debugger.hpp"
#include "tracetorch/detail/attachments.hpp"
#include "tracetorch/detail/read_file.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/module.hpp"
#include "tracetorch/nn/state_dict.hpp"
#include "tracetorch/safetensors.hpp"
#include "tracetorch/testing/common_tests.hpp"

namespace tracetorch::testing {

/// A model's inputs by name, as transformers' `inputs_dict`. Every tensor holds the batch on
/// dimension 0 (the batching test splits them there).
using Inputs = std::map<std::string, torch::Tensor>;

/// `inputs[name]`, or an undefined tensor (Python's None) when there is none.
inline torch::Tensor input_or_none(const Inputs& inputs, const std::string& name) {
  const auto found = inputs.find(name);
  return found == inputs.end() ? torch::Tensor() : found->second;
}

/// What the tests expect of the tester's model and inputs.
struct ExpectedSizes {
  std::int64_t batch_size = 0;
  std::int64_t seq_length = 0;  ///< positions in last_hidden_state (an image: patches, plus [CLS] if any)
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t encoder_seq_length = 0;  ///< key length of cross-attention (test_cross_attention_outputs)
};

/// What TRACETORCH_COMMON_MODEL_TESTS needs of a tester.
template <class T>
concept ModelTester =
    requires(const T& tester) {
      { T::model_name } -> std::convertible_to<const char*>;
      tester.make_model();
      { tester.make_inputs() } -> std::convertible_to<Inputs>;
      { tester.sizes() } -> std::convertible_to<ExpectedSizes>;
    } &&
    requires(const T& tester, std::remove_cvref_t<decltype(std::declval<const T&>().make_model())>& model,
             const Inputs& inputs, const OutputOptions& options) { tester.forward(model, inputs, options); };

namespace detail {

template <class Tester>
using model_t = std::remove_cvref_t<decltype(std::declval<const Tester&>().make_model())>;
template <class Tester>
using output_t = std::remove_cvref_t<decltype(std::declval<const Tester&>().forward(
    std::declval<model_t<Tester>&>(), std::declval<const Inputs&>(), std::declval<const OutputOptions&>()))>;

/// A static_assert that fails only when the template around it is instantiated.
template <class...>
inline constexpr bool missing = false;

template <class Tester>
constexpr std::span<const Skip> skips_of() {
  if constexpr (requires { Tester::skipped_tests; }) {
    return std::span<const Skip>(Tester::skipped_tests);
  } else {
    return {};
  }
}

/// The reason `Tester` skips `test`, or nullptr when it runs it.
template <class Tester>
constexpr const char* skip_reason(std::string_view test) {
  for (const Skip& skip : skips_of<Tester>()) {
    if (std::string_view(skip.test) == test) return skip.reason;
  }
  return nullptr;
}

template <class Out>
concept has_hidden_states = requires(Out& out) { out.hidden_states.has_value(); out.hidden_states->size(); };
template <class Out>
concept has_attentions = requires(Out& out) { out.attentions.has_value(); out.attentions->size(); };
template <class Out>
concept has_cross_attentions = requires(Out& out) { out.cross_attentions.has_value(); out.cross_attentions->size(); };

/// Every output the model's output struct can hold.
template <class Out>
OutputOptions all_outputs() {
  OutputOptions options;
  if constexpr (has_hidden_states<Out>) options.output_hidden_states = true;
  if constexpr (has_attentions<Out> || has_cross_attentions<Out>) options.output_attentions = true;
  return options;
}

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

/// The tensors of an output struct in field order, named `hidden_states[2]` and the like
/// (field names from TRACETORCH_OUTPUT; without it, `field 1`). Undefined tensors are kept, so
/// that two outputs line up.
template <class Out>
std::vector<NamedTensor> output_tensors(const Out& out) {
  std::vector<NamedTensor> all;
  const auto add = [&all](const std::string& name, const auto& value) {
    using V = std::remove_cvref_t<decltype(value)>;
    if constexpr (std::is_same_v<V, torch::Tensor>) {
      all.push_back({name, value});
    } else if constexpr (std::is_same_v<V, std::optional<std::vector<torch::Tensor>>>) {
      if (!value) return;
      for (std::size_t i = 0; i < value->size(); ++i) all.push_back({name + "[" + std::to_string(i) + "]", (*value)[i]});
    }
  };
  if constexpr (tracetorch::detail::has_output_fields<Out>) {
    tracetorch_fields(out, [&](const char* name, const auto& value) { add(name, value); });
  } else {
    boost::pfr::for_each_field(out, [&](const auto& value, std::size_t i) { add("field " + std::to_string(i), value); });
  }
  return all;
}

inline std::string shape_text(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "None";
  std::ostringstream text;
  text << tensor.sizes();
  return text.str();
}

inline std::string shape_text(std::initializer_list<std::int64_t> sizes) {
  std::ostringstream text;
  text << c10::IntArrayRef(sizes);
  return text.str();
}

/// Checks `actual` has the shape `expected`.
inline void check_shape(const std::string& what, const torch::Tensor& actual, std::initializer_list<std::int64_t> expected) {
  const bool same = actual.defined() && actual.sizes() == c10::IntArrayRef(expected);
  DOCTEST_CHECK_MESSAGE(same, what << ": shape " << shape_text(actual) << ", expected " << shape_text(expected));
}

/// numpy's allclose(actual, expected) in double precision, with the worst difference on failure.
inline void check_close(const std::string& what, const torch::Tensor& actual, const torch::Tensor& expected,
                        double atol = 1e-5, double rtol = 1e-4) {
  if (actual.defined() != expected.defined() || (actual.defined() && actual.sizes() != expected.sizes())) {
    DOCTEST_CHECK_MESSAGE(false, what << ": shape " << shape_text(actual) << " vs " << shape_text(expected));
    return;
  }
  if (!actual.defined() || actual.numel() == 0) return;
  const auto a = actual.detach().to(torch::kDouble);
  const auto b = expected.detach().to(torch::kDouble);
  const bool close = torch::allclose(a, b, rtol, atol, /*equal_nan=*/true);
  DOCTEST_CHECK_MESSAGE(close, what << ": max abs difference " << (a - b).abs().nan_to_num(0).max().item<double>()
                                   << " (atol " << atol << ", rtol " << rtol << ")");
}

/// Every tensor of two outputs of the same model, pairwise.
template <class Out>
void check_outputs_close(const std::string& what, const Out& actual, const Out& expected, double atol = 1e-5) {
  const auto a = output_tensors(actual);
  const auto b = output_tensors(expected);
  DOCTEST_REQUIRE_MESSAGE(a.size() == b.size(), what << ": " << a.size() << " output tensors vs " << b.size());
  for (std::size_t i = 0; i < a.size(); ++i) check_close(what + ": " + a[i].name, a[i].tensor, b[i].tensor, atol);
}

/// A fresh directory under the system temp dir, removed at scope end.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            ("tracetorch-model-test-" + std::to_string(random()) + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/// A model and inputs made the same way in every test: seeded, eval mode.
template <class Tester>
struct Setup {
  const Tester tester{};
  model_t<Tester> model = [this] {
    torch::manual_seed(0);
    auto made = tester.make_model();
    made->eval();
    return made;
  }();
  Inputs inputs = [this] {
    torch::manual_seed(1);
    return tester.make_inputs();
  }();
  ExpectedSizes sizes = tester.sizes();

  output_t<Tester> forward(const OutputOptions& options = {}) { return tester.forward(model, inputs, options); }
  output_t<Tester> forward(const Inputs& other, const OutputOptions& options = {}) {
    return tester.forward(model, other, options);
  }
};

/// What a checkpoint holds: PyTorch's state dict, non-persistent buffers left out (nn/state_dict.hpp).
inline std::vector<std::pair<std::string, torch::Tensor>> state_dict(const torch::nn::Module& model) {
  return ::tracetorch::nn::state_dict(model);
}

inline void collect_module_paths(const boost::json::value& node, std::set<std::string>& paths) {
  const auto& object = node.as_object();
  paths.insert(std::string(object.at("module_path").as_string()));
  if (const auto* children = object.if_contains("children")) {
    for (const auto& child : children->as_array()) collect_module_paths(child, paths);
  }
}

/// A trace JSON file, through the shared check (detail/read_file.hpp) like every reader.
inline std::string read_text(const std::filesystem::path& path) {
  return tracetorch::detail::read_regular_file(path, tracetorch::detail::kMaxTraceJsonBytes, "a trace JSON file");
}

// ---------------------------------------------------------------------------------------------
// The common tests. Each is a struct with its name and a member template `run`: a member
// template is compiled only for the testers that run it, so a model may lack what a test it
// skips would need (an inputs_embeds path, cross-attention).
// ---------------------------------------------------------------------------------------------

/// last_hidden_state is [batch, seq, hidden]; nothing else is returned unless asked for.
struct test_model_output_shapes {
  static constexpr std::string_view name = "test_model_output_shapes";
  template <class Tester>
  static void run() {
    Setup<Tester> s;
    const auto out = s.forward();
    check_shape("last_hidden_state", out.last_hidden_state,
                {s.sizes.batch_size, s.sizes.seq_length, s.sizes.hidden_size});
    if constexpr (has_hidden_states<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.hidden_states.has_value());
    if constexpr (has_attentions<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.attentions.has_value());
    if constexpr (has_cross_attentions<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.cross_attentions.has_value());
  }
};

/// output_hidden_states, from the call or from the config: layers + 1 states of [batch, seq, hidden].
struct test_hidden_states_output {
  static constexpr std::string_view name = "test_hidden_states_output";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    if constexpr (!has_hidden_states<Out>) {
      static_assert(missing<Tester>,
                    "tracetorch::testing: test_hidden_states_output needs an output struct with "
                    "`std::optional<std::vector<torch::Tensor>> hidden_states`; add it, or skip the test with a reason");
    } else {
      Setup<Tester> s;
      const auto check = [&](const Out& out, const std::string& how) {
        DOCTEST_REQUIRE_MESSAGE(out.hidden_states.has_value(), how << ": no hidden_states returned");
        DOCTEST_CHECK_MESSAGE(static_cast<std::int64_t>(out.hidden_states->size()) == s.sizes.num_hidden_layers + 1,
                              how << ": " << out.hidden_states->size() << " hidden states, expected num_hidden_layers + 1 = "
                                  << s.sizes.num_hidden_layers + 1);
        for (std::size_t i = 0; i < out.hidden_states->size(); ++i) {
          check_shape(how + ": hidden_states[" + std::to_string(i) + "]", (*out.hidden_states)[i],
                      {s.sizes.batch_size, s.sizes.seq_length, s.sizes.hidden_size});
        }
      };
      check(s.forward({.output_hidden_states = true}), "output_hidden_states=True in the call");
      if constexpr (requires { s.model->config.output_hidden_states = true; }) {
        s.model->config.output_hidden_states = true;
        check(s.forward(), "output_hidden_states=True in the config");
      }
    }
  }
};

/// Checks `count` attention maps of [batch, heads, seq, key_length], each row a distribution.
inline void check_attention_maps(const std::string& what, const std::vector<torch::Tensor>& maps,
                                 const ExpectedSizes& sizes, std::int64_t key_length) {
  DOCTEST_CHECK_MESSAGE(static_cast<std::int64_t>(maps.size()) == sizes.num_hidden_layers,
                        what << ": " << maps.size() << " maps, expected one per layer (" << sizes.num_hidden_layers << ")");
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const std::string name = what + "[" + std::to_string(i) + "]";
    check_shape(name, maps[i], {sizes.batch_size, sizes.num_attention_heads, sizes.seq_length, key_length});
    if (maps[i].defined() && maps[i].numel() > 0) {
      check_close(name + " row sums", maps[i].sum(-1), torch::ones_like(maps[i].sum(-1)), 1e-4);
    }
  }
}

/// output_attentions: one [batch, heads, seq, seq] map per layer, rows summing to 1; no
/// hidden_states unless asked for.
struct test_attention_outputs {
  static constexpr std::string_view name = "test_attention_outputs";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    if constexpr (!has_attentions<Out>) {
      static_assert(missing<Tester>,
                    "tracetorch::testing: test_attention_outputs needs an output struct with "
                    "`std::optional<std::vector<torch::Tensor>> attentions`; add it, or skip the test with a reason");
    } else {
      Setup<Tester> s;
      const auto out = s.forward({.output_attentions = true});
      DOCTEST_REQUIRE_MESSAGE(out.attentions.has_value(), "output_attentions=True: no attentions returned");
      check_attention_maps("attentions", *out.attentions, s.sizes, s.sizes.seq_length);
      if constexpr (has_hidden_states<Out>) DOCTEST_CHECK_FALSE(out.hidden_states.has_value());
      if constexpr (requires { s.model->config.output_attentions = true; }) {
        s.model->config.output_attentions = true;
        const auto from_config = s.forward();
        DOCTEST_REQUIRE_MESSAGE(from_config.attentions.has_value(), "output_attentions in the config: no attentions returned");
        check_attention_maps("attentions (config)", *from_config.attentions, s.sizes, s.sizes.seq_length);
      }
    }
  }
};

/// cross_attentions follow output_attentions: one [batch, heads, seq, encoder_seq] map per layer.
struct test_cross_attention_outputs {
  static constexpr std::string_view name = "test_cross_attention_outputs";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    if constexpr (!has_cross_attentions<Out>) {
      static_assert(missing<Tester>,
                    "tracetorch::testing: test_cross_attention_outputs needs an output struct with "
                    "`std::optional<std::vector<torch::Tensor>> cross_attentions`; add it, or skip the test with a reason");
    } else {
      Setup<Tester> s;
      DOCTEST_REQUIRE_MESSAGE(s.sizes.encoder_seq_length > 0, "sizes().encoder_seq_length must give the key length");
      const auto out = s.forward({.output_attentions = true});
      DOCTEST_REQUIRE_MESSAGE(out.cross_attentions.has_value(), "output_attentions=True: no cross_attentions returned");
      check_attention_maps("cross_attentions", *out.cross_attentions, s.sizes, s.sizes.encoder_seq_length);
      const auto plain = s.forward();
      DOCTEST_CHECK_FALSE(plain.cross_attentions.has_value());
    }
  }
};

/// to_tuple(output) (return_dict=False) holds the struct's fields in order, None ones left out.
struct test_model_outputs_equivalence {
  static constexpr std::string_view name = "test_model_outputs_equivalence";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    Setup<Tester> s;
    for (const auto& options : {OutputOptions{}, all_outputs<Out>()}) {
      const Out dict_output = s.forward(options);
      const auto tuple_output = to_tuple(s.forward(options));
      std::size_t k = 0;
      const auto compare = [&](const std::string& field, const auto& value) {
        using V = std::remove_cvref_t<decltype(value)>;
        if constexpr (std::is_same_v<V, torch::Tensor>) {
          if (!value.defined()) return;
          DOCTEST_REQUIRE_MESSAGE(k < tuple_output.size(), "the tuple ends before " << field);
          DOCTEST_REQUIRE_MESSAGE(tuple_output[k].isTensor(), "tuple[" << k << "] should be " << field);
          check_close("tuple[" + std::to_string(k) + "] vs " + field, tuple_output[k].toTensor(), value);
          ++k;
        } else if constexpr (std::is_same_v<V, std::optional<std::vector<torch::Tensor>>>) {
          if (!value) return;
          DOCTEST_REQUIRE_MESSAGE(k < tuple_output.size(), "the tuple ends before " << field);
          DOCTEST_REQUIRE_MESSAGE(tuple_output[k].isTensorList(), "tuple[" << k << "] should be " << field);
          const auto list = tuple_output[k].toTensorVector();
          DOCTEST_REQUIRE(list.size() == value->size());
          for (std::size_t i = 0; i < list.size(); ++i) {
            check_close("tuple[" + std::to_string(k) + "][" + std::to_string(i) + "] vs " + field, list[i], (*value)[i]);
          }
          ++k;
        } else if constexpr (!std::is_constructible_v<c10::IValue, const V&>) {
          if (tracetorch::detail::is_none_like(value)) return;  // an object (a cache): present, in its place
          DOCTEST_REQUIRE_MESSAGE(k < tuple_output.size(), "the tuple ends before " << field);
          DOCTEST_REQUIRE_MESSAGE(tuple_output[k].isCapsule(), "tuple[" << k << "] should be " << field);
          ++k;
        }
      };
      if constexpr (tracetorch::detail::has_output_fields<Out>) {
        tracetorch_fields(dict_output, [&](const char* field, const auto& value) { compare(field, value); });
      } else {
        boost::pfr::for_each_field(dict_output, [&](const auto& value, std::size_t i) { compare("field " + std::to_string(i), value); });
      }
      DOCTEST_CHECK_MESSAGE(k == tuple_output.size(), "the tuple has " << tuple_output.size() << " items, the struct " << k);
    }
  }
};

/// Asking for hidden_states and attentions does not change last_hidden_state, and a plain
/// call afterwards returns no captured outputs (nothing stays attached).
struct test_capture_leaves_outputs_unchanged {
  static constexpr std::string_view name = "test_capture_leaves_outputs_unchanged";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    Setup<Tester> s;
    const auto plain = s.forward();
    const auto captured = s.forward(all_outputs<Out>());
    check_close("last_hidden_state with capture", captured.last_hidden_state, plain.last_hidden_state, 0, 0);
    const auto again = s.forward();
    check_outputs_close("a plain call after a capture", again, plain, 0);
  }
};

/// Under the debugger, every registered submodule (containers aside) is TRACEABLE and is
/// called: its path appears in the trace.
struct test_trace_covers_every_submodule {
  static constexpr std::string_view name = "test_trace_covers_every_submodule";
  template <class Tester>
  static void run() {
    static_assert(tracetorch::is_traceable_v<model_t<Tester>>,
                  "tracetorch::testing: test_trace_covers_every_submodule needs a model declared with TRACEABLE(Name)");
    Setup<Tester> s;
    ScratchDir dir;
    std::filesystem::path trace;
    {
      auto guard = model_addition_debugger(s.model, {.debug_path = dir.path(), .do_prune_layers = false});
      for (const auto& path : guard.untraced_modules()) {
        DOCTEST_CHECK_MESSAGE(false, path << " is not TRACEABLE: its calls are missing from traces");
      }
      trace = guard.full_tensors_path();
      s.forward();
    }
    std::set<std::string> traced;
    collect_module_paths(boost::json::parse(read_text(trace)), traced);
    const std::string root(s.model->traced_name());
    for (const auto& item : s.model->named_modules("", /*include_self=*/false)) {
      if (tracetorch::detail::is_container(*item.value())) continue;  // a ModuleList is never called, in Python either
      const std::string path = root + "." + item.key();
      DOCTEST_CHECK_MESSAGE(traced.count(path) == 1, path << " is registered but was not called in the traced forward");
    }
  }
};

/// The debugger runs the forward under no-grad without changing its result, and leaves grad
/// mode, training mode, parameters and attachments as they were.
struct test_debugger_restores_state {
  static constexpr std::string_view name = "test_debugger_restores_state";
  template <class Tester>
  static void run() {
    static_assert(tracetorch::is_traceable_v<model_t<Tester>>,
                  "tracetorch::testing: test_debugger_restores_state needs a model declared with TRACEABLE(Name)");
    Setup<Tester> s;
    DOCTEST_REQUIRE(torch::GradMode::is_enabled());
    const auto reference = s.forward();
    DOCTEST_REQUIRE_MESSAGE(reference.last_hidden_state.requires_grad(), "the model has no parameter that requires grad");
    std::vector<std::pair<torch::Tensor, torch::Tensor>> parameters;  // (parameter, copy)
    for (const auto& p : s.model->parameters()) parameters.emplace_back(p, p.detach().clone());
    const bool training = s.model->is_training();
    ScratchDir dir;
    {
      auto guard = model_addition_debugger(s.model, {.debug_path = dir.path(), .do_prune_layers = false});
      const auto traced = s.forward();
      DOCTEST_CHECK_MESSAGE(!traced.last_hidden_state.requires_grad(), "the traced forward did not run under no-grad");
      DOCTEST_CHECK_MESSAGE(torch::GradMode::is_enabled(), "grad mode still off after the traced forward");
      check_close("last_hidden_state under the debugger", traced.last_hidden_state, reference.last_hidden_state, 0, 0);
      DOCTEST_CHECK(std::filesystem::exists(guard.full_tensors_path()));
      DOCTEST_CHECK(std::filesystem::exists(guard.summary_path()));
    }
    DOCTEST_CHECK(torch::GradMode::is_enabled());
    DOCTEST_CHECK(s.model->is_training() == training);
    for (const auto& [parameter, copy] : parameters) {
      DOCTEST_CHECK(parameter.requires_grad());
      DOCTEST_CHECK(torch::equal(parameter.detach(), copy));
    }
    for (const auto& module : s.model->modules(/*include_self=*/true)) {
      if (const auto* traced = dynamic_cast<const tracetorch::detail::TracedModuleBase*>(module.get())) {
        DOCTEST_CHECK_MESSAGE(traced->attachments_.load() == nullptr, "a module still has the debugger attached");
      }
    }
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
    const auto after = s.forward();
    DOCTEST_CHECK(after.last_hidden_state.requires_grad());
    std::size_t files_after = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files_after;
    DOCTEST_CHECK_MESSAGE(files_after == files, "a forward after the scope ended still wrote a trace");
  }
};

/// Two forwards in eval mode give the same outputs.
struct test_determinism {
  static constexpr std::string_view name = "test_determinism";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    Setup<Tester> s;
    torch::NoGradGuard no_grad;
    const auto first = s.forward(all_outputs<Out>());
    const auto second = s.forward(all_outputs<Out>());
    check_outputs_close("second forward", second, first, 1e-5);
  }
};

/// The state dict written to safetensors and read into a freshly initialised model gives the
/// same outputs; names and shapes match one to one.
struct test_save_load {
  static constexpr std::string_view name = "test_save_load";
  template <class Tester>
  static void run() {
    Setup<Tester> s;
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
};

/// Embedding input_ids with the model's input embeddings and passing inputs_embeds instead
/// gives the same outputs.
struct test_inputs_embeds_matches_input_ids {
  static constexpr std::string_view name = "test_inputs_embeds_matches_input_ids";
  template <class Tester>
  static void run() {
    if constexpr (!requires(model_t<Tester>& model, torch::Tensor ids) { model->get_input_embeddings()(ids); }) {
      static_assert(missing<Tester>,
                    "tracetorch::testing: test_inputs_embeds_matches_input_ids needs model->get_input_embeddings() "
                    "and a forward that takes inputs[\"inputs_embeds\"] in place of inputs[\"input_ids\"]; add them, "
                    "or skip the test with a reason");
    } else {
      Setup<Tester> s;
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
};

/// A batch of B gives, row by row, what B batches of one give.
struct test_batching_equivalence {
  static constexpr std::string_view name = "test_batching_equivalence";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    Setup<Tester> s;
    torch::NoGradGuard no_grad;
    DOCTEST_REQUIRE_MESSAGE(s.sizes.batch_size >= 2, "the tester's batch_size must be at least 2");
    const auto batched = output_tensors(s.forward(all_outputs<Out>()));
    for (std::int64_t row = 0; row < s.sizes.batch_size; ++row) {
      Inputs single;
      for (const auto& [key, tensor] : s.inputs) single[key] = tensor.slice(0, row, row + 1);
      const auto alone = output_tensors(s.forward(single, all_outputs<Out>()));
      DOCTEST_REQUIRE(alone.size() == batched.size());
      for (std::size_t i = 0; i < alone.size(); ++i) {
        if (!batched[i].tensor.defined()) continue;
        check_close("row " + std::to_string(row) + ": " + alone[i].name, alone[i].tensor,
                    batched[i].tensor.slice(0, row, row + 1), 1e-5);
      }
    }
  }
};

/// Inputs with the same values but non-contiguous strides give the same outputs.
struct test_non_contiguous_input {
  static constexpr std::string_view name = "test_non_contiguous_input";
  template <class Tester>
  static void run() {
    using Out = output_t<Tester>;
    Setup<Tester> s;
    torch::NoGradGuard no_grad;
    Inputs strided;
    for (const auto& [key, tensor] : s.inputs) {
      // Every other element of a tensor twice as wide: same values, stride 2 on the last dim.
      strided[key] = torch::stack({tensor, torch::zeros_like(tensor)}, -1).select(-1, 0);
      const bool strided_now = !strided[key].is_contiguous() || tensor.numel() <= 1;
      DOCTEST_CHECK_MESSAGE(strided_now, key << " is still contiguous");
      DOCTEST_CHECK(torch::equal(strided[key], tensor));
    }
    check_outputs_close("non-contiguous inputs", s.forward(strided, all_outputs<Out>()), s.forward(all_outputs<Out>()), 1e-5);
  }
};

/// In training mode a loss on last_hidden_state gives every parameter a finite, non-zero gradient.
struct test_training {
  static constexpr std::string_view name = "test_training";
  template <class Tester>
  static void run() {
    Setup<Tester> s;
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
};

/// The tester's configuration is small (under a million parameters), so the suite stays fast.
struct test_model_is_small {
  static constexpr std::string_view name = "test_model_is_small";
  template <class Tester>
  static void run() {
    Setup<Tester> s;
    std::int64_t count = 0;
    for (const auto& p : s.model->parameters()) count += p.numel();
    DOCTEST_CHECK_MESSAGE(count < 1'000'000, "the test model has " << count << " parameters; use a smaller config");
  }
};

/// In the order of common_test_names (checked below).
using all_common_tests =
    std::tuple<test_model_output_shapes, test_hidden_states_output, test_attention_outputs, test_cross_attention_outputs,
               test_model_outputs_equivalence, test_capture_leaves_outputs_unchanged, test_trace_covers_every_submodule,
               test_debugger_restores_state, test_determinism, test_save_load, test_inputs_embeds_matches_input_ids,
               test_batching_equivalence, test_non_contiguous_input, test_training, test_model_is_small>;

template <class... Tests>
constexpr bool names_match(std::tuple<Tests...>*) {
  constexpr std::string_view names[] = {Tests::name...};
  if (sizeof...(Tests) != std::size(common_test_names)) return false;
  for (std::size_t i = 0; i < sizeof...(Tests); ++i) {
    if (names[i] != common_test_names[i]) return false;
  }
  return true;
}
static_assert(names_match(static_cast<all_common_tests*>(nullptr)),
              "tracetorch::testing: common_test_names and the test structs disagree");

/// The doctest entry point of one common test for one tester. A skipped test is called only
/// under doctest's --no-skip; its body may not even compile for this model, so it says why
/// nothing ran instead of passing silently.
template <class Tester, class Test>
void run_common_test() {
  if constexpr (skip_reason<Tester>(Test::name) == nullptr) {
    Test::template run<Tester>();
  } else {
    // Strings, not const char*: doctest prints a char pointer as an address.
    const std::string why = std::string(Tester::model_name) + " skips " + std::string(Test::name) +
                            ", so --no-skip has nothing to run: " + skip_reason<Tester>(Test::name);
    DOCTEST_WARN_MESSAGE(false, why);
  }
}

/// Test names live as long as the program: doctest keeps the pointers.
inline const char* keep_name(std::string name) {
  static std::deque<std::string> names;
  return names.emplace_back(std::move(name)).c_str();
}

template <class Tester, class... Tests>
int register_each(const char* file, unsigned line, const doctest::detail::TestSuite& suite, std::tuple<Tests...>*) {
  const std::string prefix = std::string(Tester::model_name) + ": ";
  const auto add = [&](doctest::detail::funcType function, std::string_view test) {
    doctest::detail::TestCase test_case(function, file, line, suite);
    test_case * keep_name(prefix + std::string(test));
    if (const char* reason = skip_reason<Tester>(test)) test_case * doctest::skip() * doctest::description(reason);
    doctest::detail::regTest(test_case);
  };
  (add(&run_common_test<Tester, Tests>, Tests::name), ...);
  return 0;
}

template <class Tester>
int register_common_tests(const char* file, unsigned line, const doctest::detail::TestSuite& suite) {
  static_assert(ModelTester<Tester>,
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): a tester needs `static constexpr const char* model_name`, "
                "make_model(), make_inputs() -> tracetorch::testing::Inputs, sizes() -> tracetorch::testing::ExpectedSizes "
                "and forward(model, inputs, options)");
  static_assert(skips_name_common_tests(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): Tester::skipped_tests names a test that is not a common test "
                "(the names are in tracetorch::testing::common_test_names)");
  static_assert(skips_have_reasons(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): every entry of Tester::skipped_tests needs a non-empty reason");
  static_assert(skips_are_unique(skips_of<Tester>()),
                "TRACETORCH_COMMON_MODEL_TESTS(Tester): Tester::skipped_tests names the same test twice");
  return register_each<Tester>(file, line, suite, static_cast<all_common_tests*>(nullptr));
}

}  // namespace detail
}  // namespace tracetorch::testing

#define TRACETORCH_DETAIL_CAT_IMPL(a, b) a##b
#define TRACETORCH_DETAIL_CAT(a, b) TRACETORCH_DETAIL_CAT_IMPL(a, b)

/// Registers the common model tests for `Tester` as doctest cases named "<model_name>: test_x";
/// the tests in `Tester::skipped_tests` are registered skipped, their reason as the description.
/// Use at namespace scope in a test file, after the tester.
#ifdef DOCTEST_CONFIG_DISABLE
#define TRACETORCH_COMMON_MODEL_TESTS(Tester) static_assert(true)
#else
#define TRACETORCH_COMMON_MODEL_TESTS(Tester)                                                     \
  [[maybe_unused]] static const int TRACETORCH_DETAIL_CAT(tracetorch_common_model_tests_, __COUNTER__) = \
      ::tracetorch::testing::detail::register_common_tests<Tester>(                                 \
          __FILE__, __LINE__, doctest_detail_test_suite_ns::getCurrentTestSuite())
#endif
