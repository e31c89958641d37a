#pragma once
/// \file
/// Setting a C++ value from a Python value: a keyword struct's field by its declared name
/// (`--call use_cache=False`), a forward's argument rebuilt from a trace (module replay). The
/// keyword struct is walked by the mutable `tracetorch_keywords(Type&, visit)` that
/// TRACETORCH_KEYWORDS defines, `visit(name, field)` with the raw field (`Keyword<T>&`).

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracetorch/error.hpp"
#include "tracetorch/detail/module/output_option_names.hpp"
#include "tracetorch/detail/module/keyword_fields.hpp"
#include "tracetorch/detail/module/serialize.hpp"
#include "tracetorch/detail/module/python_value.hpp"

namespace tracetorch::detail {

/// A value the C++ side cannot take: a wrong type (`hint` empty) or an object no trace can
/// rebuild (`hint` says how it could be made so).
struct NotRebuildable : Error {
  NotRebuildable(const std::string& what, std::string how) : Error(what), hint(std::move(how)) {}
  std::string hint;
};

/// What rebuilt values own (a cache a pointer argument points to) and may do.
struct RebuildContext {
  std::vector<std::shared_ptr<void>> owned;
  /// A recorded cache object may be replaced by an empty cache of the argument's kind: true
  /// where the call is a first forward (its cache_position starts at 0).
  bool empty_cache_allowed = false;
  /// Set when an empty cache stood in for a recorded one: the note for the report.
  std::string note;
};

/// A cache class an empty one of which can stand in for a first forward's (tracetorch::DynamicCache
/// and the classes derived from it).
template <class C>
concept empty_constructible_cache = std::is_default_constructible_v<C> && requires(C& c, const torch::Tensor& t) {
  c.update(t, t, std::int64_t{0});
};

/// tracetorch::OutputOptions, known by its members: its header includes the module headers that
/// include this one.
template <class T>
concept output_options_like = requires(T& o) {
  o.output_hidden_states; o.output_attentions; o.output; o.use_cache; o.return_dict; o.debug_io; o.debug_io_dir; o.prune_layers;
};

template <class T>
inline constexpr bool is_std_vector_v = false;
template <class T, class A>
inline constexpr bool is_std_vector_v<std::vector<T, A>> = true;
template <class T>
inline constexpr bool is_shared_ptr_v = false;
template <class T>
inline constexpr bool is_shared_ptr_v<std::shared_ptr<T>> = true;

template <class T>
void assign_python_value(T& target, const PythonValue& value, RebuildContext& context, const std::string& where);

[[noreturn]] inline void wrong_python_value(const std::string& where, std::string_view wants, const PythonValue& value) {
  throw NotRebuildable(where + " takes " + std::string(wants) + ", not " + describe_python_value(value), "");
}

/// A pointer argument (raw or shared): None, or an empty cache standing in for a recorded one.
template <class P>
void assign_pointer(P& target, const PythonValue& value, RebuildContext& context, const std::string& where) {
  using Pointee = std::remove_cvref_t<decltype(*target)>;
  if (value.kind == PythonValue::Kind::none) {
    target = nullptr;
    return;
  }
  if constexpr (empty_constructible_cache<Pointee>) {
    if (value.kind == PythonValue::Kind::object && context.empty_cache_allowed) {
      auto cache = std::make_shared<Pointee>();
      context.owned.push_back(cache);
      if constexpr (is_shared_ptr_v<P>) {
        target = cache;
      } else {
        target = cache.get();
      }
      context.note = where + ": the recorded cache replayed as an empty one of the argument's kind (a first forward)";
      return;
    }
    throw NotRebuildable(where + ": " + describe_python_value(value) + " cannot be rebuilt from the trace",
                         "a first forward's cache (cache_position from 0) is replayed with an empty cache of the same kind; "
                         "record a trace of a first forward");
  }
  throw NotRebuildable(where + ": " + describe_python_value(value) + " cannot be rebuilt from the trace",
                       "pass None for it, or give its type a tracetorch replay of its own");
}

/// A sequence into a tuple, element by element.
template <class T>
void assign_tuple(T& target, const PythonValue& value, RebuildContext& context, const std::string& where) {
  constexpr std::size_t size = std::tuple_size_v<T>;
  if (value.kind != PythonValue::Kind::sequence || value.items.size() != size) {
    wrong_python_value(where, "a tuple of " + std::to_string(size), value);
  }
  std::size_t index = 0;
  std::apply([&](auto&... element) {
    ((assign_python_value(element, value.items[index].second, context, where + "[" + std::to_string(index) + "]"), ++index), ...);
  }, target);
}

/// The scalar kinds: bool, integers, floating point, strings, tensors.
template <class T>
void assign_scalar(T& target, const PythonValue& value, const std::string& where) {
  using Kind = PythonValue::Kind;
  if constexpr (std::is_same_v<T, torch::Tensor>) {
    if (value.kind == Kind::none) {
      target = torch::Tensor();
    } else if (value.kind == Kind::tensor) {
      target = value.tensor;
    } else {
      wrong_python_value(where, "a tensor or None", value);
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if (value.kind != Kind::boolean) wrong_python_value(where, "True or False", value);
    target = value.boolean;
  } else if constexpr (std::is_integral_v<T>) {
    if (value.kind != Kind::integer) wrong_python_value(where, "an integer", value);
    target = static_cast<T>(value.integer);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (value.kind == Kind::integer) {
      target = static_cast<T>(value.integer);
    } else if (value.kind == Kind::floating) {
      target = static_cast<T>(value.floating);
    } else {
      wrong_python_value(where, "a number", value);
    }
  } else {
    static_assert(std::is_same_v<T, std::string>);
    if (value.kind != Kind::string) wrong_python_value(where, "a string", value);
    target = value.text;
  }
}

template <class Pack>
void assign_keyword(Pack& pack, std::string_view name, const PythonValue& value, RebuildContext& context);

/// Any supported C++ type from a Python value; NotRebuildable names `where` and the cause.
template <class T>
void assign_python_value(T& target, const PythonValue& value, RebuildContext& context, const std::string& where) {
  using Kind = PythonValue::Kind;
  if constexpr (std::is_same_v<T, torch::Tensor> || std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    assign_scalar(target, value, where);
  } else if constexpr (is_keyword_v<T>) {
    using U = typename T::value_type;
    if (value.kind == Kind::none) {
      target = T(nullptr);
    } else {
      U held{};
      assign_python_value(held, value, context, where);
      target = T(std::move(held));
    }
  } else if constexpr (is_optional_like<T>) {
    if (value.kind == Kind::none) {
      target.reset();
    } else {
      typename T::value_type held{};
      assign_python_value(held, value, context, where);
      target = std::move(held);
    }
  } else if constexpr (std::is_pointer_v<T> || is_shared_ptr_v<T>) {
    assign_pointer(target, value, context, where);
  } else if constexpr (is_tuple_like<T>) {
    assign_tuple(target, value, context, where);
  } else if constexpr (is_std_vector_v<T>) {
    if (value.kind != Kind::sequence) wrong_python_value(where, "a list", value);
    target.clear();
    for (const auto& [key, element] : value.items) {
      assign_python_value(target.emplace_back(), element, context, where + "[" + key + "]");
    }
  } else if constexpr (is_keyword_pack<T>) {
    if (value.kind != Kind::mapping) wrong_python_value(where, "keyword arguments", value);
    for (const auto& [key, element] : value.items) assign_keyword(target, key, element, context);
  } else {
    throw NotRebuildable(where + ": a " + c10::demangle(typeid(T).name()) + " cannot be rebuilt from a Python value",
                         "give the forward a tensor, number, string, tuple, list or keyword struct argument here");
  }
}

/// The names a keyword struct declares, in order.
template <class Pack>
std::vector<std::string> keyword_names(const Pack& pack) {
  std::vector<std::string> names;
  if constexpr (output_options_like<Pack>) {
    names = output_option_names<Pack>(record_key_flags(pack));
  } else {
    // The const walk visits only what was passed: a default-constructed copy would miss fields
    // with defaults, so the mutable walk over a scratch copy lists them all.
    Pack scratch{};
    tracetorch_keywords(scratch, [&](std::string_view name, auto&) { names.emplace_back(name); });
  }
  return names;
}

inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

/// OutputOptions' keywords by name, recorded in the order they are set (`call_order`, as Python's
/// kwargs dict), and `output_<key>` for a record key that some record map of the program declares
/// (record_key_flags, by argument-dependent lookup: capturing_models.hpp includes this header's
/// includers). Not settable here: a list of hidden-state positions (`tracetorch::layers`).
template <class Options>
bool assign_output_option(Options& options, std::string_view name, const PythonValue& value, RebuildContext& context) {
  const std::string where(name);
  const auto as_bool = [&] {
    bool flag = false;
    assign_python_value(flag, value, context, where);
    return flag;
  };
  const auto as_string = [&] {
    std::string text;
    assign_python_value(text, value, context, where);
    return text;
  };
  if (!set_output_option_named(options, name, as_bool, as_string)) {
    const auto flags = record_key_flags(options);
    if (std::find(flags.begin(), flags.end(), name) == flags.end()) return false;
    using Flag = typename decltype(options.output)::value_type;
    options.output.push_back(Flag{decltype(Flag::key)::named(name.substr(7)), as_bool()});
  }
  if constexpr (requires { options.call_order; }) options.call_order.emplace_back(name);
  return true;
}

/// Whether `pack` declares `name`; sets it from `value` when it does (NotRebuildable when the
/// value does not fit the field).
template <class Pack>
bool try_assign_keyword(Pack& pack, std::string_view name, const PythonValue& value, RebuildContext& context) {
  if constexpr (output_options_like<Pack>) {
    return assign_output_option(pack, name, value, context);
  } else {
    bool found = false;
    tracetorch_keywords(pack, [&](std::string_view field_name, auto& field) {
      if (found || field_name != name) return;
      found = true;
      using Field = std::remove_reference_t<decltype(field)>;
      if constexpr (std::is_const_v<Field>) {
        throw Error("tracetorch: keywords cannot be set by name: TRACETORCH_KEYWORDS has no mutable walk");
      } else {
        assign_python_value(field, value, context, std::string(name));
      }
    });
    return found;
  }
}

/// Sets keyword `name` of `pack`; an unknown name is a tracetorch::Error listing the names it takes.
template <class Pack>
void assign_keyword(Pack& pack, std::string_view name, const PythonValue& value, RebuildContext& context) {
  bool found = false;
  try {
    found = try_assign_keyword(pack, name, value, context);
  } catch (const NotRebuildable& e) {
    if (!e.hint.empty()) throw;
    throw NotRebuildable(std::string(e.what()) + " (the keywords: " + join_names(keyword_names(pack)) + ")", "");
  }
  if (!found) throw NotRebuildable("no keyword '" + std::string(name) + "': the keywords are " + join_names(keyword_names(pack)), "");
}

}  // namespace tracetorch::detail
