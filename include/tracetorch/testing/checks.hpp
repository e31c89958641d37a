#pragma once
/// \file
/// The assertions the common model tests share: an output struct's tensors by name, and
/// shape and closeness checks that say which tensor differs and by how much.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <boost/pfr.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "tracetorch/capture.hpp"

namespace tracetorch::testing::detail {

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

/// Each output `options` asks for is in `out`: hidden_states, attentions, and every other key
/// (`output_router_logits=True`...) with at least one value, as the model's record map promises.
template <class Out>
void check_requested_outputs(const std::string& what, const Out& out, const OutputOptions& options) {
  if constexpr (requires { out.hidden_states.has_value(); }) {
    if (options.output_hidden_states && options.output_hidden_states->any()) {
      DOCTEST_CHECK_MESSAGE(out.hidden_states.has_value(), what << ": output_hidden_states=True: no hidden_states returned");
    }
  }
  if constexpr (requires { out.attentions.has_value(); }) {
    if (options.output_attentions.value_or(false)) {
      DOCTEST_CHECK_MESSAGE(out.attentions.has_value(), what << ": output_attentions=True: no attentions returned");
    }
  }
  if constexpr (::tracetorch::detail::has_output_fields<Out>) {
    for (const auto& flag : options.output) {
      if (!flag.value) continue;
      bool found = false;
      tracetorch_fields(out, [&](const char* field, const auto& value) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, std::optional<std::vector<torch::Tensor>>>) {
          if (flag.key.name() != field) return;
          found = true;
          const bool returned = value.has_value() && !value->empty();
          const std::string problem = std::string(value ? "no values" : "None") + " returned";
          DOCTEST_CHECK_MESSAGE(returned, what << ": output_" << std::string(field) << "=True: " << problem);
        }
      });
      DOCTEST_CHECK_MESSAGE(found, what << ": output_" << std::string(flag.key.name()) << ": the output struct has no such field");
    }
  }
}

}  // namespace tracetorch::testing::detail
