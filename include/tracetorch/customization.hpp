#pragma once
/// \file
/// The customization points: three free functions a type declares in its own namespace, found by
/// argument-dependent lookup (as nlohmann/json's to_json/from_json), each telling the debugger,
/// capture and the diff how a value of the type is recorded. The concepts below say whether a
/// type has one.
///
/// - `std::string tracetorch_repr(const T&)`: the repr line Python's debugger would record for
///   the object `T` stands for (a cache, a config):
///   \code
///   namespace my { struct Router { int top_k = 2; }; }
///   namespace my { inline std::string tracetorch_repr(const Router& r) { return "Router(top_k=" + std::to_string(r.top_k) + ")"; } }
///   \endcode
/// - `tracetorch_fields(const T&, visit)`: `visit(name, value)` per field, in order: `T` records
///   like a transformers ModelOutput (TRACETORCH_OUTPUT declares it for output structs):
///   \code
///   namespace my { struct Pair { torch::Tensor first, second; }; }
///   namespace my { template <class V> void tracetorch_fields(const Pair& p, V&& visit) { visit("first", p.first); visit("second", p.second); } }
///   \endcode
/// - `tracetorch_keywords(const T&, visit)`: `visit(name, value)` per keyword the caller passed:
///   `T` records as a call's `kwargs`. TRACETORCH_KEYWORDS (keywords.hpp) declares it, with the
///   mutable walk that setting keywords by name needs.
///
/// docs/reference/customization.md has each with a compiled example and the test that shows it.

#include "tracetorch/detail/module/serialize.hpp"

namespace tracetorch {

/// `T` has `tracetorch_repr`: recorded as an object of that repr.
template <class T>
concept has_python_repr = detail::has_python_repr<T>;

/// `T` has `tracetorch_fields`: recorded as a ModelOutput of those fields.
template <class T>
concept has_named_fields = detail::has_named_fields<T>;

/// `T` has `tracetorch_keywords`: recorded as keyword arguments.
template <class T>
concept is_keyword_pack = detail::is_keyword_pack<T>;

}  // namespace tracetorch
