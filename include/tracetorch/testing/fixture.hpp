#pragma once
/// \file
/// What every common test starts from: a seeded model in eval mode with its inputs, a scratch
/// directory for the files a test writes, what a test requires of the model, and the macro that
/// defines a test.

#include <torch/torch.h>

#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

#include "tracetorch/module.hpp"
#include "tracetorch/testing/tester.hpp"

namespace tracetorch::testing::detail {

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

/// `present`, where it is true; otherwise the build stops here with one message. Used as
/// `if constexpr (output_struct_has<has_attentions<Out>>())`, so that the test body,
/// which would not compile either, is left out.
template <bool present>
constexpr bool output_struct_has() {
  static_assert(present,
                "tracetorch::testing: the model's output struct lacks the member this common test reads "
                "(std::optional<std::vector<torch::Tensor>>: hidden_states for test_hidden_states_output, attentions "
                "for test_attention_outputs, cross_attentions for test_cross_attention_outputs); add it, or skip the "
                "test with a reason");
  return present;
}

/// Stops the build when the tester's model is not declared with TRACEABLE: the common test
/// that calls it (named in the compiler's "required from" note) inspects traces.
template <class Tester>
constexpr void require_traceable_model() {
  static_assert(tracetorch::is_traceable_v<model_t<Tester>>,
                "tracetorch::testing: this common test needs a model declared with TRACEABLE(Name)");
}

}  // namespace tracetorch::testing::detail

/// Defines common test `test_name`, as doctest's TEST_CASE defines a case: a struct of that name
/// whose `name` is its string and whose `run<Tester>()` runs the body that follows on a fresh
/// Setup, compiled per tester. In the body, `Tester` is the tester and `s` its Setup. Undefined
/// at the end of testing/registration.hpp, after the four groups of tests.
#define TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_name)                                     \
  struct test_name {                                                                         \
    static constexpr std::string_view name = #test_name;                                     \
    template <class Tester>                                                                  \
    static void run() {                                                                      \
      ::tracetorch::testing::detail::Setup<Tester> setup;                                    \
      body<Tester>(setup);                                                                   \
    }                                                                                        \
    template <class Tester>                                                                  \
    static void body(::tracetorch::testing::detail::Setup<Tester>& s);                       \
  };                                                                                         \
  template <class Tester>                                                                    \
  void test_name::body([[maybe_unused]] ::tracetorch::testing::detail::Setup<Tester>& s)
