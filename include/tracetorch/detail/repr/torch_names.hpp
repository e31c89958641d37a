#pragma once
/// \file
/// How Python spells torch's small values: str(dtype), str(shape), str(tuple(shape)), layouts
/// and grad_fn names, for the tensor repr and for the trace fields that show them.

#include <torch/torch.h>

#include <cstddef>
#include <string>

namespace tracetorch::detail {

/// str(dtype): "torch.float32", "torch.int64", "torch.bool", "torch.bfloat16", ...
inline std::string dtype_repr(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::ComplexHalf: return "torch.complex32";
    case c10::ScalarType::ComplexFloat: return "torch.complex64";
    case c10::ScalarType::ComplexDouble: return "torch.complex128";
    case c10::ScalarType::Bool: return "torch.bool";
    case c10::ScalarType::QInt8: return "torch.qint8";
    case c10::ScalarType::QUInt8: return "torch.quint8";
    case c10::ScalarType::QInt32: return "torch.qint32";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::QUInt4x2: return "torch.quint4x2";
    case c10::ScalarType::QUInt2x4: return "torch.quint2x4";
    default: return std::string("torch.") + c10::toString(type);
  }
}

/// str(tensor.shape): "torch.Size([2, 7, 64])", "torch.Size([])".
inline std::string shape_repr(c10::IntArrayRef sizes) {
  std::string out = "torch.Size([";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  out += "])";
  return out;
}

/// str(tuple(shape)): "(2, 3)", "(5,)", "()".
inline std::string python_tuple_repr(c10::IntArrayRef sizes) {
  std::string out = "(";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  if (sizes.size() == 1) out += ',';
  out += ')';
  return out;
}

inline std::string layout_repr(c10::Layout layout) {
  switch (layout) {
    case c10::kStrided: return "torch.strided";
    case c10::kSparse: return "torch.sparse_coo";
    case c10::kSparseCsr: return "torch.sparse_csr";
    case c10::kSparseCsc: return "torch.sparse_csc";
    case c10::kSparseBsr: return "torch.sparse_bsr";
    case c10::kSparseBsc: return "torch.sparse_bsc";
    case c10::kMkldnn: return "torch._mkldnn";
    default: return "torch.layout";
  }
}

/// The grad_fn name Python shows: the node's class name without its C++ namespace.
inline std::string grad_fn_name(const torch::Tensor& t) {
  std::string name = t.grad_fn()->name();
  const auto colons = name.rfind("::");
  if (colons != std::string::npos) name.erase(0, colons + 2);
  return name;
}

}  // namespace tracetorch::detail
