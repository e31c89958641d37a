#pragma once
/// \file
/// The element a recorder reads from a call's result, knowing the target's forward type: a
/// tuple element, a list element counted at run time (from the end when negative), or the
/// index an index function of the output gives.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>  // std::ranges::range, begin and size (<ranges> costs more to parse)
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "tracetorch/detail/capture/record_index.hpp"
#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/call.hpp"

namespace tracetorch::detail {

/// `index` as a position in a result of `size` elements, Python's negative indices counted from
/// the end; out of range is an error naming the module.
inline std::size_t checked_position(std::int64_t index, std::size_t size, std::string_view path) {
  const auto count = static_cast<std::int64_t>(size);
  const std::int64_t position = index < 0 ? index + count : index;
  if (position < 0 || position >= count) {
    throw Error("tracetorch::capture_outputs: recorder index " + std::to_string(index) + " is out of range for " +
                std::string(path) + "'s output of " + std::to_string(size) + " element(s)");
  }
  return static_cast<std::size_t>(position);
}

/// Element `index` of a forward's output: the output itself when it is a tensor.
template <class R>
torch::Tensor recorded_element(const R& output, std::int64_t index, std::string_view path) {
  if constexpr (tensor_like<R>) {
    return tensor_of(output);  // one tensor is recorded whole, whatever the index
  } else if constexpr (is_tuple_like<R>) {
    const std::size_t at = checked_position(index, std::tuple_size_v<R>, path);
    torch::Tensor found;
    bool is_tensor = false;
    std::size_t i = 0;
    std::apply(
        [&](const auto&... element) {
          ((i++ == at ? void((is_tensor = tensor_like<std::remove_cvref_t<decltype(element)>>, found = tensor_of(element)))
                      : void()),
           ...);
        },
        output);
    if (!is_tensor) {
      throw Error("tracetorch::capture_outputs: recorder index " + std::to_string(index) + " names an element of " +
                  std::string(path) + "'s output that is not a tensor");
    }
    return found;
  } else {
    static_assert(tensor_range<R>, "tracetorch::capture_outputs: a recorded output is a tensor, a tuple or a list of tensors");
    const std::size_t at = checked_position(index, static_cast<std::size_t>(std::ranges::size(output)), path);
    return tensor_of(*std::next(std::ranges::begin(output), static_cast<std::ptrdiff_t>(at)));
  }
}

/// Reads what `Recorder` records from a call of its target. A replacement patched in may have
/// another forward type: its result is then read as upstream's hooks read any tuple.
template <class Recorder>
torch::Tensor read_recorded(const CallResult& result, std::int64_t index, std::string_view path) {
  using Result = forward_result_t<typename Recorder::target>;
  const auto* typed = dynamic_cast<const CallResultOf<Result>*>(&result);
  if constexpr (indexes_by_output<typename Recorder::target, Recorder::index>()) {
    if (typed == nullptr) {
      throw Error("tracetorch::capture_outputs: " + std::string(path) +
                  " returns another type than the recorder's target, which its index function reads");
    }
    index = static_cast<std::int64_t>(std::invoke(Recorder::index, typed->value()));
  }
  if (typed == nullptr) {
    if (index < 0) {
      throw Error("tracetorch::capture_outputs: " + std::string(path) +
                  " returns another type than the recorder's target: a negative index cannot be counted");
    }
    return result.tensor(static_cast<std::size_t>(index));
  }
  return recorded_element(typed->value(), index, path);
}

using RecordedReader = torch::Tensor (*)(const CallResult&, std::int64_t, std::string_view);

/// The typed reader of `Recorder`'s target, or null when its forward is overloaded or a template
/// (then the index is a checked non-negative number, read as upstream's hooks do).
template <class Recorder>
constexpr RecordedReader recorded_reader() {
  if constexpr (std::is_void_v<forward_result_t<typename Recorder::target>>) {
    return nullptr;
  } else {
    return &read_recorded<Recorder>;
  }
}

/// The index function of the call's keywords a recorder was given, as a plain function.
template <class Recorder>
std::int64_t index_from_keywords(const CallKeywords& keywords) {
  return static_cast<std::int64_t>(std::invoke(Recorder::index, keywords));
}

template <class Recorder>
constexpr std::int64_t (*keyword_index_function())(const CallKeywords&) {
  if constexpr (indexes_by_keywords<Recorder::index>) {
    return &index_from_keywords<Recorder>;
  } else {
    return nullptr;
  }
}

}  // namespace tracetorch::detail
