#pragma once
/// \file
/// The JSON of one call's inputs or outputs, built as transformers' `_serialize_io` builds it;
/// tensors are handed to a TensorEncoder, which owns their records and files.

#include <torch/torch.h>

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracetorch/detail/module/call.hpp"
#include "tracetorch/detail/trace_format/format.hpp"
#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/repr/string_repr.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"

namespace tracetorch::detail {

/// Turns one tensor into its JSON record; `prefix` is the file stem transformers would use.
class TensorEncoder {
 public:
  /// The record of `tensor`, its values in `storage`.
  virtual boost::json::value encode(const torch::Tensor& tensor, const std::string& prefix, boost::json::storage_ptr storage) = 0;

 protected:
  ~TensorEncoder() = default;
};

/// Sets `slot` to the JSON string `text`, in the slot's own storage.
inline void set_text(boost::json::value& slot, std::string_view text) {
  slot.emplace_string().assign(text.data(), text.size());
}

/// Builds the JSON of a call's inputs or outputs: leaves as their Python repr, tensors through
/// the encoder, each named by its place in the call (`<prefix>_args_0`, `<prefix>_kwargs_<name>`,
/// then `_<index>` or `_<key>` per level).
class TraceJsonBuilder final : public ArgumentVisitor {
 public:
  /// The values it builds are in `storage`.
  TraceJsonBuilder(std::string prefix, TensorEncoder& encoder, boost::json::storage_ptr storage)
      : prefix_(std::move(prefix)),
        base_size_(prefix_.size()),
        encoder_(encoder),
        root_(storage),
        positional_(storage),
        keywords_(storage) {}

  /// The one value visited (a call's result).
  boost::json::value take_value() { return std::move(root_); }
  /// `{"args": [...], "kwargs": {...}}`, empty parts dropped unless `keep_empty`.
  boost::json::object take_arguments(bool keep_empty) {
    boost::json::object out(root_.storage());
    if (keep_empty || !positional_.empty()) out[trace_format::kArgs] = std::move(positional_);
    if (keep_empty || !keywords_.empty()) out[trace_format::kKwargs] = std::move(keywords_);
    return out;
  }

  void none() override { place("None"); }
  void boolean(bool value) override { place(value ? "True" : "False"); }
  void integer(std::int64_t value) override { place(std::to_string(value)); }
  void floating(double value) override { place(python_float_repr(value)); }
  void string(std::string_view value) override { place(python_string_repr(value)); }
  void dtype(c10::ScalarType value) override { place(dtype_repr(value)); }
  void tensor(const torch::Tensor& value) override {
    *next_ = encoder_.encode(value, prefix_, next_->storage());
    next_ = nullptr;
  }
  void repr(std::string_view python_repr) override { place(python_repr); }
  void begin_sequence() override { open(boost::json::kind::array); }
  void begin_mapping() override { open(boost::json::kind::object); }
  void element(std::size_t index) override {
    name_next(std::to_string(index));
    next_ = &open_.back().container->as_array().emplace_back(nullptr);
  }
  void entry(std::string_view key) override {
    name_next(key);
    next_ = &open_.back().container->as_object()[key];
  }
  void end() override { open_.pop_back(); }
  void positional(std::size_t index) override {
    name_argument(trace_format::kArgsStem, std::to_string(index));
    next_ = &positional_.emplace_back(nullptr);
  }
  void keyword(std::string_view name) override {
    name_argument(trace_format::kKwargsStem, name);
    next_ = &keywords_[name];
  }

 private:
  // An open container and the length of the prefix that names it. The pointers stay valid:
  // a container's parent gets no new value until the container is closed.
  struct Open {
    boost::json::value* container;
    std::size_t prefix_size;
  };

  void name_argument(std::string_view kind, std::string_view name) {
    prefix_.resize(base_size_);
    prefix_ += kind;
    prefix_ += name;
  }
  void name_next(std::string_view suffix) {
    prefix_.resize(open_.back().prefix_size);
    prefix_ += trace_format::kStemSeparator;
    prefix_ += suffix;
  }
  void place(std::string_view text) {
    set_text(*next_, text);
    next_ = nullptr;
  }
  void open(boost::json::kind kind) {
    if (kind == boost::json::kind::array) {
      next_->emplace_array();
    } else {
      next_->emplace_object();
    }
    open_.push_back({next_, prefix_.size()});
    next_ = nullptr;
  }

  std::string prefix_;
  std::size_t base_size_;
  TensorEncoder& encoder_;
  boost::json::value root_;
  boost::json::array positional_;
  boost::json::object keywords_;
  boost::json::value* next_ = &root_;
  std::vector<Open> open_;
};

}  // namespace tracetorch::detail
