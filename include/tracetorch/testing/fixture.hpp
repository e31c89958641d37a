#pragma once
/// \file
/// What every common test starts from: a seeded model in eval mode with its inputs, and a
/// scratch directory for the files a test writes.

#include <torch/torch.h>

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

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

}  // namespace tracetorch::testing::detail
