#pragma once
/// \file
/// The common tests of what a forward returns: output shapes, hidden states, attention maps
/// (self and cross), and the struct against its to_tuple() form.

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <boost/pfr.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tracetorch/capture.hpp"
#include "tracetorch/testing/checks.hpp"
#include "tracetorch/testing/fixture.hpp"
#include "tracetorch/testing/tester.hpp"

namespace tracetorch::testing::detail {

/// last_hidden_state is [batch, seq, hidden]; nothing else is returned unless asked for.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_model_output_shapes) {
  const auto out = s.forward();
  check_shape("last_hidden_state", out.last_hidden_state,
              {s.sizes.batch_size, s.sizes.seq_length, s.sizes.hidden_size});
  if constexpr (has_hidden_states<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.hidden_states.has_value());
  if constexpr (has_attentions<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.attentions.has_value());
  if constexpr (has_cross_attentions<output_t<Tester>>) DOCTEST_CHECK_FALSE(out.cross_attentions.has_value());
}

/// output_hidden_states, from the call or from the config: layers + 1 states of [batch, seq, hidden].
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_hidden_states_output) {
  using Out = output_t<Tester>;
  if constexpr (output_struct_has<has_hidden_states<Out>>()) {
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
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_attention_outputs) {
  using Out = output_t<Tester>;
  if constexpr (output_struct_has<has_attentions<Out>>()) {
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

/// cross_attentions follow output_attentions: one [batch, heads, seq, encoder_seq] map per layer.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_cross_attention_outputs) {
  using Out = output_t<Tester>;
  if constexpr (output_struct_has<has_cross_attentions<Out>>()) {
    DOCTEST_REQUIRE_MESSAGE(s.sizes.encoder_seq_length > 0, "sizes().encoder_seq_length must give the key length");
    const auto out = s.forward({.output_attentions = true});
    DOCTEST_REQUIRE_MESSAGE(out.cross_attentions.has_value(), "output_attentions=True: no cross_attentions returned");
    check_attention_maps("cross_attentions", *out.cross_attentions, s.sizes, s.sizes.encoder_seq_length);
    const auto plain = s.forward();
    DOCTEST_CHECK_FALSE(plain.cross_attentions.has_value());
  }
}

/// One field of an output struct against the next item of its to_tuple(), `k`: a field that
/// is present is that item (a tensor or tensor list equal to it, an object in its place) and
/// moves `k` on; a None one is not in the tuple.
template <class V>
void check_tuple_item(const OutputTuple& tuple_output, std::size_t& k, const std::string& field, const V& value) {
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
}

/// to_tuple(output) (return_dict=False) holds the struct's fields in order, None ones left out;
/// with every output asked for (every key the record map declares), each one is there.
TRACETORCH_DETAIL_DEFINE_COMMON_TEST(test_model_outputs_equivalence) {
  using Out = output_t<Tester>;
  for (const auto& options : {OutputOptions{}, all_outputs<Tester>()}) {
    const Out dict_output = s.forward(options);
    check_requested_outputs("the struct", dict_output, options);
    const auto tuple_output = to_tuple(s.forward(options));
    std::size_t k = 0;
    const auto compare = [&](const std::string& field, const auto& value) {
      check_tuple_item(tuple_output, k, field, value);
    };
    if constexpr (tracetorch::detail::has_output_fields<Out>) {
      tracetorch_fields(dict_output, [&](const char* field, const auto& value) { compare(field, value); });
    } else {
      boost::pfr::for_each_field(dict_output, [&](const auto& value, std::size_t i) { compare("field " + std::to_string(i), value); });
    }
    DOCTEST_CHECK_MESSAGE(k == tuple_output.size(), "the tuple has " << tuple_output.size() << " items, the struct " << k);
  }
}

}  // namespace tracetorch::testing::detail
