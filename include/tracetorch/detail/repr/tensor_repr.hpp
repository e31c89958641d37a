#pragma once
/// \file
/// repr(tensor) as torch/_tensor_str.py assembles it around the body: the per-layout parts
/// (sparse, compressed, quantized, meta, empty, dense) and the suffixes after them.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/repr/body_layout.hpp"
#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/repr/print_options.hpp"
#include "tracetorch/detail/repr/string_repr.hpp"
#include "tracetorch/detail/repr/tensor_body.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"
#include "tracetorch/detail/text/lines.hpp"

namespace tracetorch::detail {

/// _add_suffixes: ", suffix" while the line stays within the width, else a new line.
inline void add_suffixes(std::string& text, const std::vector<std::string>& suffixes, std::int64_t indent,
                         bool force_newline) {
  const auto newline = text.rfind('\n');
  // torch's arithmetic (rfind gives -1 when there is no newline), kept for its +2 slack.
  std::int64_t last_line_len = static_cast<std::int64_t>(text.size()) -
                               (newline == std::string::npos ? -1 : static_cast<std::int64_t>(newline)) + 1;
  for (const auto& suffix : suffixes) {
    const auto suffix_len = static_cast<std::int64_t>(suffix.size());
    if (force_newline || last_line_len + suffix_len + 2 > kPrintLineWidth) {
      text += ",\n";
      text.append(static_cast<std::size_t>(indent), ' ');
      text += suffix;
      last_line_len = indent + suffix_len;
      force_newline = false;
    } else {
      text += ", ";
      text += suffix;
      last_line_len += suffix_len + 2;
    }
  }
  text += ')';
}

/// "tensor(" is where every body starts.
inline constexpr std::int64_t kTensorReprIndent = 7;

inline std::string tensor_repr(const torch::Tensor& tensor);

/// One named part of a sparse tensor: "values=tensor(<body>)", with its size when empty.
inline std::string sparse_part(std::string_view prefix, const torch::Tensor& part) {
  std::string out(prefix);
  out += tensor_body(part, kTensorReprIndent + static_cast<std::int64_t>(prefix.size()));
  if (part.numel() == 0) out += ", size=" + python_tuple_repr(part.sizes());
  out += ')';
  return out;
}

/// The text and suffixes of a tensor repr, between "tensor(" and the closing ')'.
struct TensorReprParts {
  std::string text;
  std::vector<std::string> suffixes;
  /// Whether the values alone imply the dtype (the default float and complex types, int64,
  /// bool), which then goes unshown.
  bool dtype_implied = false;
  std::string dtype_suffix;

  void dtype_unless_implied() {
    if (!dtype_implied) suffixes.push_back(dtype_suffix);
  }
};

inline void sparse_coo_parts(const torch::Tensor& t, TensorReprParts& parts) {
  parts.suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
  if (!t.is_meta()) parts.suffixes.push_back("nnz=" + std::to_string(t._nnz()));
  parts.dtype_unless_implied();
  const std::string pad(static_cast<std::size_t>(kTensorReprIndent), ' ');
  parts.text = sparse_part("indices=tensor(", t._indices().detach()) + ",\n" + pad +
               sparse_part("values=tensor(", t._values().detach());
}

inline void sparse_compressed_parts(const torch::Tensor& t, TensorReprParts& parts) {
  parts.suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
  parts.suffixes.push_back("nnz=" + std::to_string(t._nnz()));
  parts.dtype_unless_implied();
  const bool rows = t.layout() == torch::kSparseCsr || t.layout() == torch::kSparseBsr;
  const auto compressed = (rows ? t.crow_indices() : t.ccol_indices()).detach();
  const auto plain = (rows ? t.col_indices() : t.row_indices()).detach();
  const std::string pad(static_cast<std::size_t>(kTensorReprIndent), ' ');
  parts.text = sparse_part(rows ? "crow_indices=tensor(" : "ccol_indices=tensor(", compressed) + ",\n" + pad +
               sparse_part(rows ? "col_indices=tensor(" : "row_indices=tensor(", plain) + ",\n" + pad +
               sparse_part("values=tensor(", t.values().detach());
}

inline void quantized_parts(const torch::Tensor& t, TensorReprParts& parts) {
  parts.suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
  parts.dtype_unless_implied();
  const auto scheme = t.qscheme();
  parts.suffixes.push_back(std::string("quantization_scheme=torch.") + c10::toString(scheme));
  if (scheme == c10::kPerTensorAffine || scheme == c10::kPerTensorSymmetric) {
    parts.suffixes.push_back("scale=" + python_float_repr(t.q_scale()));
    parts.suffixes.push_back("zero_point=" + std::to_string(t.q_zero_point()));
  } else if (scheme == c10::kPerChannelAffine || scheme == c10::kPerChannelSymmetric ||
             scheme == c10::kPerChannelAffineFloatQParams) {
    parts.suffixes.push_back("scale=" + tensor_repr(t.q_per_channel_scales()));
    parts.suffixes.push_back("zero_point=" + tensor_repr(t.q_per_channel_zero_points()));
    parts.suffixes.push_back("axis=" + std::to_string(t.q_per_channel_axis()));
  }
  parts.text = tensor_body(t.dequantize(), kTensorReprIndent);
}

/// The body and layout-specific suffixes, as _str_intern picks them by layout.
inline void layout_parts(const torch::Tensor& t, TensorReprParts& parts) {
  const bool default_dtype = t.scalar_type() == c10::typeMetaToScalarType(c10::get_default_dtype());
  if (t.is_sparse()) {
    sparse_coo_parts(t, parts);
  } else if (t.layout() == torch::kSparseCsr || t.layout() == torch::kSparseCsc || t.layout() == torch::kSparseBsr ||
             t.layout() == torch::kSparseBsc) {
    sparse_compressed_parts(t, parts);
  } else if (t.is_quantized()) {
    quantized_parts(t, parts);
  } else if (t.is_meta()) {
    parts.suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (!default_dtype) parts.suffixes.push_back(parts.dtype_suffix);
    parts.text = "...";
  } else if (t.numel() == 0) {
    // Explicit shape unless (0,), and dtype even for int64/bool: nothing shows it otherwise.
    if (t.dim() != 1) parts.suffixes.push_back("size=" + python_tuple_repr(t.sizes()));
    if (!default_dtype) parts.suffixes.push_back(parts.dtype_suffix);
    parts.text = "[]";
  } else {
    parts.dtype_unless_implied();
    parts.text = tensor_body(t, kTensorReprIndent);
  }
}

/// The suffixes every layout shares, after the layout's own: layout, autograd, names.
inline void common_suffixes(const torch::Tensor& t, std::vector<std::string>& suffixes) {
  if (t.layout() != torch::kStrided) suffixes.push_back("layout=" + layout_repr(t.layout()));
  if (t.grad_fn()) {
    suffixes.push_back("grad_fn=<" + grad_fn_name(t) + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  if (!t.has_names()) return;
  std::string names = "names=(";
  const auto dimnames = t.names();
  for (std::size_t i = 0; i < dimnames.size(); ++i) {
    if (i > 0) names += ", ";
    names += dimnames[i].isWildcard() ? "None" : python_string_repr(dimnames[i].symbol().toUnqualString());
  }
  if (dimnames.size() == 1) names += ',';
  suffixes.push_back(names + ")");
}

/// repr(tensor) == str(tensor) under the trace print options; an undefined tensor is None.
inline std::string tensor_repr(const torch::Tensor& t) {
  if (!t.defined()) return "None";
  c10::NoGradGuard no_grad;
  TensorReprParts parts;
  // Note [Print tensor device] in torch: shown whenever it is not the (CPU) default.
  if (!t.device().is_cpu()) parts.suffixes.push_back("device='" + t.device().str() + "'");
  const auto type = t.scalar_type();
  const auto default_type = c10::typeMetaToScalarType(c10::get_default_dtype());
  const auto default_complex = default_type == torch::kDouble ? torch::kComplexDouble : torch::kComplexFloat;
  parts.dtype_implied =
      type == default_type || type == default_complex || type == torch::kLong || type == torch::kBool;
  parts.dtype_suffix = "dtype=" + dtype_repr(type);
  layout_parts(t, parts);
  common_suffixes(t, parts.suffixes);
  std::string out = "tensor(" + parts.text;
  add_suffixes(out, parts.suffixes, kTensorReprIndent, t.is_sparse());
  return out;
}

/// repr() of a 0-d CPU tensor of `type` holding `value`, with no autograd history, made
/// without creating the tensor: "tensor(0.1234)", "tensor(nan, dtype=torch.float16)".
inline std::string scalar_tensor_repr(double value, c10::ScalarType type) {
  ShownData data;
  data.kind = ShownData::Kind::floating;
  data.re.push_back(value);
  std::string out = "tensor(";
  BodyWriter(data, {}, false).write(out, kTensorReprIndent);
  std::vector<std::string> suffixes;
  if (type != c10::typeMetaToScalarType(c10::get_default_dtype())) suffixes.push_back("dtype=" + dtype_repr(type));
  add_suffixes(out, suffixes, kTensorReprIndent, false);
  return out;
}

/// print(tensor) as lines (str.splitlines()).
inline std::vector<std::string> tensor_print_lines(const torch::Tensor& tensor) {
  std::vector<std::string> lines;
  for_each_line(tensor_repr(tensor), [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

}  // namespace tracetorch::detail
