#pragma once
/// \file
/// The layout of a tensor's shown elements as torch's _tensor_str_with_formatter writes it:
/// brackets, commas, line breaks at the line width, "..." where summarised. No LibTorch.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tracetorch/detail/repr/element_format.hpp"
#include "tracetorch/detail/repr/print_options.hpp"

namespace tracetorch::detail {

/// The shown elements of a tensor in row-major order, widened to double / int64.
struct ShownData {
  enum class Kind { floating, complex, integer, boolean };
  Kind kind = Kind::floating;
  std::vector<double> re, im;      // floating and complex
  std::vector<std::int64_t> ints;  // integer and bool
};

/// Lays out the shown elements as _tensor_str_with_formatter does. Elements are written in
/// row-major order straight into `out`; `next_` walks the shown data.
class BodyWriter {
 public:
  BodyWriter(const ShownData& data, std::span<const std::int64_t> sizes, bool summarize)
      : data_(data), sizes_(sizes), summarize_(summarize) {
    switch (data.kind) {
      case ShownData::Kind::floating: re_.emplace(data.re.data(), data.re.size()); break;
      case ShownData::Kind::complex:
        re_.emplace(data.re.data(), data.re.size());
        im_.emplace(data.im.data(), data.im.size());
        break;
      case ShownData::Kind::integer:
      case ShownData::Kind::boolean:
        int_.emplace(data.ints.data(), data.ints.size(), data.kind == ShownData::Kind::boolean);
        break;
    }
  }

  void write(std::string& out, std::int64_t indent) {
    next_ = 0;
    if (sizes_.empty()) {
      element(out);
      return;
    }
    tensor(out, 0, indent);
  }

 private:
  std::size_t element_length() const {
    if (int_) return int_->width() + 2;
    std::size_t length = re_->width() + 2;
    if (im_) length += im_->width() + 1;  // the imaginary part and its 'j'
    return length;
  }

  void element(std::string& out) {
    const std::size_t i = next_++;
    if (int_) {
      int_->append(out, data_.ints[i]);
      return;
    }
    re_->append(out, data_.re[i]);
    if (!im_) return;
    // imag_str = (format(imag) + "j").lstrip(); a '+' joins it unless it carries a sign.
    const std::size_t start = out.size();
    im_->append(out, data_.im[i]);
    std::size_t first = start;
    while (first < out.size() && out[first] == ' ') ++first;
    out.erase(start, first - start);
    if (out[start] != '-' && out[start] != '+') out.insert(out.begin() + static_cast<std::ptrdiff_t>(start), '+');
    out += 'j';
  }

  bool ellipsis(std::size_t d) const { return summarize_ && sizes_[d] > 2 * kPrintEdgeItems; }

  /// The items of dimension d as printed: its shown indices, and "..." between them when
  /// summarised.
  std::size_t items(std::size_t d) const {
    return ellipsis(d) ? static_cast<std::size_t>(2 * kPrintEdgeItems + 1) : static_cast<std::size_t>(sizes_[d]);
  }

  bool is_dots(std::size_t d, std::size_t item) const {
    return item == static_cast<std::size_t>(kPrintEdgeItems) && ellipsis(d);
  }

  void tensor(std::string& out, std::size_t d, std::int64_t indent) {
    const std::size_t dims = sizes_.size();
    if (d + 1 == dims) {
      vector(out, d, indent);
      return;
    }
    out += '[';
    for (std::size_t item = 0, count = items(d); item < count; ++item) {
      if (item > 0) {
        out += ',';
        out.append(dims - d - 1, '\n');
        out.append(static_cast<std::size_t>(indent + 1), ' ');
      }
      if (is_dots(d, item)) {
        out += "...";
        continue;
      }
      tensor(out, d + 1, indent + 1);
    }
    out += ']';
  }

  void vector(std::string& out, std::size_t d, std::int64_t indent) {
    const auto room = kPrintLineWidth - indent;
    const auto length = static_cast<std::int64_t>(element_length());
    const std::size_t per_line = room > 0 ? static_cast<std::size_t>(std::max<std::int64_t>(1, room / length)) : 1;
    out += '[';
    for (std::size_t item = 0, count = items(d); item < count; ++item) {
      if (item > 0) {
        if (item % per_line == 0) {
          out += ",\n";
          out.append(static_cast<std::size_t>(indent + 1), ' ');
        } else {
          out += ", ";
        }
      }
      if (is_dots(d, item)) {
        out += " ...";
        continue;
      }
      element(out);
    }
    out += ']';
  }

  const ShownData& data_;
  std::span<const std::int64_t> sizes_;
  bool summarize_;
  std::optional<FloatFormatter> re_, im_;
  std::optional<IntFormatter> int_;
  std::size_t next_ = 0;
};

}  // namespace tracetorch::detail
