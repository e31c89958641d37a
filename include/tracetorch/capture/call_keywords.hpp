#pragma once
/// \file
/// The keyword arguments of one traced call, as a recorder's index function reads them: GPT-2's
/// block puts its attention weights at index 2 with `use_cache=True` and at 1 without.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/module/call.hpp"

namespace tracetorch {

/// The keywords a call passed (a keyword struct's passed fields, an OutputOptions' set ones),
/// by name. A keyword the caller did not pass is absent: the forward's own default applies, so
/// an index function says what that default is (`kw.flag("use_cache").value_or(false)`).
class CallKeywords {
 public:
  /// True when the call passed `name` (None included).
  bool passed(std::string_view name) const noexcept { return find(name) != nullptr; }
  /// True when the call passed `name` as None.
  bool is_none(std::string_view name) const noexcept {
    const auto* entry = find(name);
    return entry != nullptr && entry->kind == Kind::none;
  }
  /// The bool the call passed as `name`; none when not passed, passed as None, or not a bool.
  std::optional<bool> flag(std::string_view name) const noexcept {
    const auto* entry = find(name);
    return entry != nullptr && entry->kind == Kind::boolean ? std::optional<bool>(entry->value != 0) : std::nullopt;
  }
  /// The integer the call passed as `name`; none when not passed or not an integer.
  std::optional<std::int64_t> integer(std::string_view name) const noexcept {
    const auto* entry = find(name);
    return entry != nullptr && entry->kind == Kind::integer ? std::optional(entry->value) : std::nullopt;
  }

  enum class Kind { none, boolean, integer, other };
  /// Adds a passed keyword (capture's collector does; tests may).
  void add(std::string name, Kind kind, std::int64_t value = 0) { entries_.push_back({std::move(name), kind, value}); }

 private:
  struct Entry {
    std::string name;
    Kind kind;
    std::int64_t value;
  };
  const Entry* find(std::string_view name) const noexcept {
    for (const auto& entry : entries_) {
      if (entry.name == name) return &entry;
    }
    return nullptr;
  }
  std::vector<Entry> entries_;
};

namespace detail {

/// Collects the top-level keyword values of a call; nested values (tuples, tensors, structs)
/// count as passed, of kind `other`.
class KeywordCollector final : public ArgumentVisitor {
 public:
  explicit KeywordCollector(CallKeywords& out) : out_(out) {}

  void positional(std::size_t) override { pending_.reset(); }
  void keyword(std::string_view name) override { pending_ = std::string(name); }
  void none() override { leaf(CallKeywords::Kind::none, 0); }
  void boolean(bool value) override { leaf(CallKeywords::Kind::boolean, value ? 1 : 0); }
  void integer(std::int64_t value) override { leaf(CallKeywords::Kind::integer, value); }
  void floating(double) override { leaf(CallKeywords::Kind::other, 0); }
  void string(std::string_view) override { leaf(CallKeywords::Kind::other, 0); }
  void dtype(c10::ScalarType) override { leaf(CallKeywords::Kind::other, 0); }
  void tensor(const torch::Tensor&) override { leaf(CallKeywords::Kind::other, 0); }
  void repr(std::string_view) override { leaf(CallKeywords::Kind::other, 0); }
  void begin_sequence() override { open(); }
  void begin_mapping() override { open(); }
  void element(std::size_t) override {}
  void entry(std::string_view) override {}
  void end() override { --depth_; }

 private:
  void leaf(CallKeywords::Kind kind, std::int64_t value) {
    if (depth_ != 0 || !pending_) return;
    out_.add(std::move(*pending_), kind, value);
    pending_.reset();
  }
  void open() {
    leaf(CallKeywords::Kind::other, 0);
    ++depth_;
  }

  CallKeywords& out_;
  std::optional<std::string> pending_;
  int depth_ = 0;
};

inline CallKeywords keywords_of(const CallArgs& args) {
  CallKeywords keywords;
  KeywordCollector collector(keywords);
  args.visit(collector);
  return keywords;
}

}  // namespace detail
}  // namespace tracetorch
