#pragma once
// Shared by the diff test files: hand-made use_repr=true values and the reading of a DiffReport.

#include <tracetorch/diff.hpp>

#include "test_helpers.hpp"

#include <string>

namespace tracetorch_test {

/// A printed tensor value of a hand-made use_repr=true trace: `numbers` of a tensor of `shape`.
inline boost::json::object printed(const std::string& numbers, const std::string& shape = "[2]",
                                   const std::string& dtype = "float32") {
  return {{"shape", "torch.Size(" + shape + ")"}, {"dtype", "torch." + dtype},
          {"value", boost::json::array{"tensor([" + numbers + "])"}}};
}

/// Where a diff report's first divergence is, or "none".
inline std::string first_divergence(const tracetorch::DiffReport& report) {
  return report.first_divergence ? report.tensors[*report.first_divergence].where() : "none";
}

}  // namespace tracetorch_test
