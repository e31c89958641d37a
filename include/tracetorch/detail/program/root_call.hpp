#pragma once
/// \file
/// The root call of a trace program: the arguments of the model's forward, deduced from its
/// signature (a keyword struct, OutputOptions, ...), each keyword set by name.

#include <torch/torch.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/holder.hpp"
#include "tracetorch/detail/module/keyword_assign.hpp"

namespace tracetorch::detail {

/// The parameters and result of a unique `forward`, by its member pointer type.
template <class F>
struct forward_signature {
  static constexpr bool known = false;
};
#define TRACETORCH_DETAIL_FORWARD_SIGNATURE(QUALIFIERS)        \
  template <class C, class R, class... A>                      \
  struct forward_signature<R (C::*)(A...) QUALIFIERS> {        \
    static constexpr bool known = true;                        \
    using result = R;                                          \
    using parameters = std::tuple<A...>;                       \
    using values = std::tuple<std::decay_t<A>...>;             \
  }
TRACETORCH_DETAIL_FORWARD_SIGNATURE();
TRACETORCH_DETAIL_FORWARD_SIGNATURE(const);
TRACETORCH_DETAIL_FORWARD_SIGNATURE(noexcept);
TRACETORCH_DETAIL_FORWARD_SIGNATURE(const noexcept);
#undef TRACETORCH_DETAIL_FORWARD_SIGNATURE

/// The forward's signature of a model type (its holder, Impl or traced class).
template <class Model>
using model_forward_t = forward_signature<typename forward_pointer<typename traced_type_t<Model>::ImplType>::type>;

/// The arguments of a root call, default-constructed, then set by keyword name.
template <class Values>
class RootCall {
 public:
  Values values{};

  /// Every keyword the call takes, the keyword structs' names in parameter order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    std::apply([&](const auto&... value) { (append_names(value, out), ...); }, values);
    return out;
  }

  bool takes(std::string_view name) const {
    for (const auto& known : names()) {
      if (known == name) return true;
    }
    return false;
  }

  /// Sets keyword `name` in the first keyword struct declaring it; NotRebuildable naming every
  /// keyword the call takes when none does or the value does not fit.
  void set(std::string_view name, const PythonValue& value) {
    RebuildContext context;
    bool found = false;
    try {
      std::apply([&](auto&... pack) { ((found = found || try_set(pack, name, value, context)), ...); }, values);
    } catch (const NotRebuildable& e) {
      throw NotRebuildable(std::string(e.what()) + " (the call's keywords: " + join_names(names()) + ")", e.hint);
    }
    if (!found) throw NotRebuildable("no keyword '" + std::string(name) + "': the call's keywords are " + join_names(names()), "");
    if (!context.owned.empty()) owned_.insert(owned_.end(), context.owned.begin(), context.owned.end());
  }

  /// The value of tensor keyword `name` where one is set, else an undefined tensor.
  torch::Tensor tensor(std::string_view name) const {
    torch::Tensor found;
    std::apply([&](const auto&... pack) { (find_tensor(pack, name, found), ...); }, values);
    return found;
  }

 private:
  template <class T>
  static void append_names(const T& value, std::vector<std::string>& out) {
    if constexpr (is_keyword_pack<T>) {
      for (auto& name : keyword_names(value)) out.push_back(std::move(name));
    }
  }
  template <class T>
  static bool try_set(T& pack, std::string_view name, const PythonValue& value, RebuildContext& context) {
    if constexpr (is_keyword_pack<T>) {
      return try_assign_keyword(pack, name, value, context);
    } else {
      return false;
    }
  }
  template <class T>
  static void find_tensor(const T& pack, std::string_view name, torch::Tensor& found) {
    if constexpr (is_keyword_pack<T>) {
      tracetorch_keywords(pack, [&](std::string_view field, const auto& value) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, torch::Tensor>) {
          if (field == name && !found.defined()) found = value;
        }
      });
    }
  }

  std::vector<std::shared_ptr<void>> owned_;
};

}  // namespace tracetorch::detail
