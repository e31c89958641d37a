#pragma once
/// \file
/// Output structs as transformers' `ModelOutput.to_tuple()` (return_dict=False): the fields as
/// c10::IValues, None ones left out, in declaration order or in upstream's capture order.

#include <torch/torch.h>

#include <boost/pfr/core.hpp>  // for_each_field, tuple_size_v (all of <boost/pfr.hpp> costs more to parse)

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/serialize.hpp"
#include "tracetorch/detail/module/holder.hpp"

namespace tracetorch {

/// An output struct as transformers' `ModelOutput.to_tuple()`: its fields in order, None ones
/// (undefined tensors, empty optionals) left out; `out[0].toTensor()`.
class OutputTuple {
 public:
  std::size_t size() const noexcept { return items_.size(); }
  const c10::IValue& operator[](std::size_t i) const {
    if (i >= items_.size()) {
      throw Error("tracetorch: OutputTuple index " + std::to_string(i) + " out of range (size " +
                  std::to_string(items_.size()) + ")");
    }
    return items_[i];
  }
  auto begin() const noexcept { return items_.begin(); }
  auto end() const noexcept { return items_.end(); }

  void push_back(c10::IValue value) { items_.push_back(std::move(value)); }

 private:
  std::vector<c10::IValue> items_;
};

namespace detail {

/// A to_tuple item that c10::IValue cannot hold itself.
template <class T>
struct TupleObject final : torch::CustomClassHolder {
  explicit TupleObject(T object) : value(std::move(object)) {}
  T value;
};

template <class T>
void append_tuple_item(OutputTuple& tuple, const T& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, torch::Tensor>) {
    if (value.defined()) tuple.push_back(value);
  } else if constexpr (is_optional_like<U>) {
    if (value.has_value()) append_tuple_item(tuple, *value);
  } else if constexpr (std::is_same_v<U, std::vector<torch::Tensor>>) {
    tuple.push_back(c10::IValue(c10::List<torch::Tensor>(value)));
  } else if constexpr (std::is_constructible_v<c10::IValue, const U&>) {
    tuple.push_back(c10::IValue(value));
  } else {
    // An object (a cache, a pointer to one): kept as it is in a capsule, None when null.
    if (!is_none_like(value)) tuple.push_back(c10::IValue::make_capsule(c10::make_intrusive<TupleObject<U>>(value)));
  }
}

template <class T>
const T& tuple_object(const OutputTuple& tuple, std::size_t i) {
  const auto& item = tuple[i];
  if (item.isCapsule()) {
    const auto capsule = item.toCapsule();
    if (const auto* object = dynamic_cast<const TupleObject<T>*>(capsule.get())) return object->value;
  }
  throw Error("tracetorch: OutputTuple item " + std::to_string(i) + " is not an object of the type asked for");
}

template <class Out>
OutputTuple to_tuple_in_field_order(const Out& out) {
  OutputTuple tuple;
  boost::pfr::for_each_field(out, [&](const auto& field) { append_tuple_item(tuple, field); });
  return tuple;
}

/// The class holding the record map: the Impl of a holder, or the class itself.
template <class Model>
auto record_map_owner() {
  if constexpr (requires { Model::can_record_outputs; }) {
    return std::type_identity<Model>{};
  } else {
    return std::type_identity<typename traced_type_t<Model>::ImplType>{};
  }
}

/// The fields capture_outputs sets, in the order it sets them (upstream: record-map order, a
/// split attentions record followed by cross_attentions).
template <class Owner>
std::vector<std::string_view> captured_fields() {
  using Records = std::remove_cvref_t<decltype(Owner::can_record_outputs)>;
  std::vector<std::string_view> names;
  std::apply(
      [&](auto... record) {
        ((names.push_back(decltype(record)::field),
          decltype(record)::splits_cross_attentions ? names.push_back("cross_attentions") : void()),
         ...);
      },
      Records{});
  return names;
}

/// Upstream's ModelOutput order: the fields `Model`'s forward set itself first, in declaration
/// order, then the captured ones in the order capture set them.
template <class Model, class Out>
OutputTuple to_tuple_in_capture_order(const Out& out) {
  using Owner = typename decltype(record_map_owner<Model>())::type;
  const auto captured = captured_fields<Owner>();
  const auto is_captured = [&](std::string_view name) {
    return std::find(captured.begin(), captured.end(), name) != captured.end();
  };
  OutputTuple tuple;
  tracetorch_fields(out, [&](std::string_view name, const auto& value) {
    if (!is_captured(name)) append_tuple_item(tuple, value);
  });
  for (const auto wanted : captured) {
    tracetorch_fields(out, [&](std::string_view name, const auto& value) {
      if (name == wanted) append_tuple_item(tuple, value);
    });
  }
  return tuple;
}

}  // namespace detail
}  // namespace tracetorch
