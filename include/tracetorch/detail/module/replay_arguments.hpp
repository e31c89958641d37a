#pragma once
/// \file
/// Module replay's typed step: a call's recorded arguments (Python values) rebuilt into a
/// forward's parameter types, and the forward run on them. traced.hpp's Traced classes, which
/// know the exact signature, call replay_forward_with<A...>; nothing here runs unless a replay asks.

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/keyword_assign.hpp"

namespace tracetorch::detail {

/// One recorded call to replay: its positional arguments and keywords, in the call's order.
struct ReplayRequest {
  std::vector<PythonValue> args;
  std::vector<std::pair<std::string, PythonValue>> kwargs;
  RebuildContext context;
};

/// Fills `values` (the forward's parameters, decayed) from `request`: keyword structs take the
/// keywords by name, the other parameters the positional arguments in order.
template <class Values>
void fill_replay_arguments(Values& values, ReplayRequest& request) {
  std::size_t positional = 0, parameters = 0;
  std::vector<std::string> names;
  std::apply([&](auto&... value) {
    const auto take = [&](auto& target) {
      using T = std::remove_cvref_t<decltype(target)>;
      if constexpr (is_keyword_pack<T>) {
        for (auto& name : keyword_names(target)) names.push_back(std::move(name));
      } else {
        ++parameters;
        if (positional < request.args.size()) {
          assign_python_value(target, request.args[positional], request.context, "argument " + std::to_string(positional));
          ++positional;
        }
      }
    };
    (take(value), ...);
  }, values);
  if (request.args.size() != parameters) {
    throw NotRebuildable("the call passes " + std::to_string(request.args.size()) + " positional arguments, the forward takes " +
                             std::to_string(parameters),
                         "pass by keyword what upstream passes by keyword (a keyword struct), positionally what it passes so");
  }
  for (const auto& [name, value] : request.kwargs) {
    bool found = false;
    std::apply([&](auto&... pack) {
      const auto set = [&](auto& target) {
        if constexpr (is_keyword_pack<std::remove_cvref_t<decltype(target)>>) {
          if (!found) found = try_assign_keyword(target, name, value, request.context);
        }
      };
      (set(pack), ...);
    }, values);
    if (!found) {
      throw NotRebuildable("the call passes keyword '" + name + "', the forward's keywords are " +
                               (names.empty() ? std::string("none") : join_names(names)),
                           "declare it in the forward's keyword struct (TRACETORCH_KEYWORDS)");
    }
  }
}

/// A rebuilt value as parameter type `A`: an lvalue for a reference parameter, else moved.
template <class A, class V>
decltype(auto) pass_as(V& value) {
  if constexpr (std::is_lvalue_reference_v<A>) {
    return static_cast<A>(value);
  } else {
    return static_cast<std::remove_reference_t<A>&&>(value);
  }
}

/// A parameter type replay can hold and pass: default-constructible, and movable where it is
/// taken by value.
template <class A>
inline constexpr bool replayable_parameter_v =
    std::is_default_constructible_v<std::decay_t<A>> &&
    (std::is_lvalue_reference_v<A> || std::is_constructible_v<std::decay_t<A>, std::decay_t<A>&&>);

/// Rebuilds the arguments of a forward with parameters `A...` and calls `run(A...)` on them.
template <class... A, class Run>
void replay_forward_with(ReplayRequest& request, Run&& run) {
  if constexpr ((replayable_parameter_v<A> && ...)) {
    std::tuple<std::decay_t<A>...> values{};
    fill_replay_arguments(values, request);
    std::apply([&](auto&... value) { run(pass_as<A>(value)...); }, values);
  } else {
    throw NotRebuildable("a parameter of the forward has no default value to rebuild it into",
                         "give each parameter type of the forward a default constructor");
  }
}

}  // namespace tracetorch::detail
