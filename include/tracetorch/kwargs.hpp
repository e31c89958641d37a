#pragma once
/// \file
/// `tracetorch::Kwargs`: Python's `**kwargs`, named values in the order the caller passed them.
///
/// Upstream hands some keywords down through every level without naming them: Qwen2-MoE's model
/// passes `**kwargs` (say `output_router_logits=True`) to every decoder layer and on to its
/// `self_attn`. A port does the same with one trailing parameter instead of a field per flag in
/// every keyword struct; a trace records the entries after the struct's keywords, in their order,
/// as Python records `layer(h, attention_mask=m, **kwargs)`:
///
/// \code
/// torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& h, const LayerKeywords& kw = {},
///                                         const tracetorch::Kwargs& kwargs = {}) {
///   return self_attn({.hidden_states = h, .attention_mask = kw.attention_mask}, kwargs);  // handed on
/// }
/// model(ids, {}, {{"output_attentions", true}, {"output_hidden_states", true}});  // in this order
/// bool router = kwargs.flag("output_router_logits").value_or(false);
/// \endcode

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tracetorch/error.hpp"

namespace tracetorch {

/// One value of a Kwargs entry: None, bool, int, float or str, as Python would hold it.
class KwargValue {
 public:
  using Variant = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string>;

  KwargValue(std::nullptr_t = nullptr) {}                                      // NOLINT: implicit by design
  KwargValue(bool value) : value_(value) {}                                    // NOLINT
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  KwargValue(T value) : value_(static_cast<std::int64_t>(value)) {}            // NOLINT
  KwargValue(double value) : value_(value) {}                                  // NOLINT
  KwargValue(std::string value) : value_(std::move(value)) {}                  // NOLINT
  KwargValue(const char* value) : value_(std::string(value)) {}                // NOLINT

  const Variant& variant() const noexcept { return value_; }
  bool is_none() const noexcept { return std::holds_alternative<std::nullptr_t>(value_); }
  template <class T>
  const T* get_if() const noexcept {
    return std::get_if<T>(&value_);
  }
  friend bool operator==(const KwargValue&, const KwargValue&) = default;

 private:
  Variant value_;
};

/// One `name=value`.
struct Kwarg {
  std::string name;
  KwargValue value;
};

/// Python's `**kwargs`: entries in the caller's order, each name once.
class Kwargs {
 public:
  Kwargs() = default;
  /// `{{"output_attentions", true}, {"output_hidden_states", true}}`; a name given twice is an
  /// Error, as Python's "got multiple values for keyword argument".
  Kwargs(std::initializer_list<Kwarg> entries) {  // NOLINT: implicit, so a braced list reads as kwargs
    for (const auto& entry : entries) add(entry.name, entry.value);
  }

  /// Appends `name=value`; a name already there is an Error.
  Kwargs& add(std::string name, KwargValue value) {
    if (find(name) != nullptr) throw Error("tracetorch::Kwargs: got multiple values for keyword argument '" + name + "'");
    entries_.push_back({std::move(name), std::move(value)});
    return *this;
  }
  /// The value of `name`, or nullptr when not passed.
  const KwargValue* find(std::string_view name) const noexcept {
    for (const auto& entry : entries_) {
      if (entry.name == name) return &entry.value;
    }
    return nullptr;
  }
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  /// A bool flag: its value, nullopt when not passed or None; an Error naming it for another type.
  std::optional<bool> flag(std::string_view name) const {
    const KwargValue* value = find(name);
    if (value == nullptr || value->is_none()) return std::nullopt;
    if (const bool* flag = value->get_if<bool>()) return *flag;
    throw Error("tracetorch::Kwargs: '" + std::string(name) + "' must be True, False or None");
  }
  /// The entries named in `names`, in this Kwargs' order: what a port hands on where upstream
  /// passes only some of its keywords down.
  Kwargs only(std::initializer_list<std::string_view> names) const {
    Kwargs kept;
    for (const auto& entry : entries_) {
      for (const auto name : names) {
        if (entry.name == name) kept.entries_.push_back(entry);
      }
    }
    return kept;
  }
  /// Every entry but those named: Python's `kwargs.pop(name)` before handing the rest on.
  Kwargs without(std::initializer_list<std::string_view> names) const {
    Kwargs kept;
    for (const auto& entry : entries_) {
      bool dropped = false;
      for (const auto name : names) dropped = dropped || entry.name == name;
      if (!dropped) kept.entries_.push_back(entry);
    }
    return kept;
  }

  const std::vector<Kwarg>& entries() const noexcept { return entries_; }
  bool empty() const noexcept { return entries_.empty(); }

 private:
  std::vector<Kwarg> entries_;
};

/// A trace records the entries in order, as keyword arguments (None as `None`).
template <class Visitor>
void tracetorch_keywords(const Kwargs& kwargs, Visitor&& visit) {
  for (const auto& entry : kwargs.entries()) {
    std::visit([&](const auto& value) { visit(std::string_view(entry.name), value); }, entry.value.variant());
  }
}

}  // namespace tracetorch
