#pragma once
/// \file
/// Python's text for values, byte for byte as CPython 3 and PyTorch 1.13.1 write it, so that
/// traces made from C++ compare equal to traces made from Python.
///
/// Tensors print as `print(tensor)` does after
/// `torch.set_printoptions(sci_mode=True, linewidth=120)` with the other options at their
/// defaults (precision=4, threshold=1000, edgeitems=3). The rules are those of
/// torch/_tensor_str.py, re-implemented over raw element data: only the elements that are
/// shown (the summarised data for numel > 1000) are read and formatted, so printing costs
/// O(shown elements) whatever the tensor's size.
///
/// \code
/// tracetorch::python_repr(0.1);                  // "0.1"
/// tracetorch::python_repr(std::string("it's"));  // "\"it's\""
/// tracetorch::python_repr(torch::ones({2}));     // "tensor([1., 1.])"
/// \endcode
///
/// The implementation lives in detail/repr/ (numbers, strings, the tensor body and the
/// suffixes around it) and detail/text/ (Unicode); only the tensor parts need LibTorch.

#include <torch/torch.h>

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>
#include <vector>

#include "tracetorch/detail/text/float_repr.hpp"
#include "tracetorch/detail/repr/number_format.hpp"
#include "tracetorch/detail/repr/string_repr.hpp"
#include "tracetorch/detail/repr/tensor_body.hpp"
#include "tracetorch/detail/repr/tensor_repr.hpp"
#include "tracetorch/detail/repr/torch_names.hpp"
#include "tracetorch/detail/text/lines.hpp"
#include "tracetorch/detail/text/unicode.hpp"

namespace tracetorch {

/// str(dtype): "torch.float32", "torch.int64", "torch.bool", "torch.bfloat16", ...
///
/// \code
/// tracetorch::python_dtype_repr(torch::kFloat16);  // "torch.float16"
/// \endcode
inline std::string python_dtype_repr(c10::ScalarType type) { return detail::dtype_repr(type); }

/// str(tensor.shape): "torch.Size([2, 7, 64])", "torch.Size([])".
///
/// \code
/// tracetorch::python_shape_repr(x.sizes());  // "torch.Size([2, 7, 64])"
/// \endcode
inline std::string python_shape_repr(c10::IntArrayRef sizes) { return detail::shape_repr(sizes); }

/// repr(float): the shortest text that reads back as `v`, fixed-point while the decimal
/// exponent is in [-4, 16), otherwise exponent form ('1e-06', '0.0001', '3.0', '1e+16').
///
/// \code
/// tracetorch::python_repr(1e-6);  // "1e-06"
/// \endcode
inline std::string python_repr(double v) { return detail::python_float_repr(v); }

/// repr(int) for every integer type except bool and the character types.
///
/// \code
/// tracetorch::python_repr(std::int64_t{-3});  // "-3"
/// \endcode
template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char> && !std::same_as<T, wchar_t> &&
           !std::same_as<T, char8_t> && !std::same_as<T, char16_t> && !std::same_as<T, char32_t>)
inline std::string python_repr(T v) {
  char buf[24];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

/// repr(bool). A template so that pointers (e.g. string literals) never convert to bool.
///
/// \code
/// tracetorch::python_repr(true);  // "True"
/// \endcode
template <std::same_as<bool> T>
inline std::string python_repr(T v) {
  return v ? "True" : "False";
}

/// repr(str) of UTF-8 text: single quotes unless the text has ' and no ", backslash escapes
/// for the quote, \\, \t, \n, \r, and \xhh / \uhhhh / \Uhhhhhhhh for what Python deems
/// unprintable; printable non-ASCII is kept as is. Bytes that are not UTF-8 show as Python's
/// surrogateescape reads them ('\udcff').
///
/// \code
/// tracetorch::python_repr("a\tb");  // "'a\\tb'"
/// \endcode
inline std::string python_repr(std::string_view text) { return detail::python_string_repr(text); }

/// A char is a one-character str (std::int8_t / signed char stay integers).
///
/// \code
/// tracetorch::python_repr('x');  // "'x'"
/// \endcode
template <std::same_as<char> T>
inline std::string python_repr(T c) {
  return python_repr(std::string_view(&c, 1));
}

/// repr(tensor) == str(tensor) under set_printoptions(sci_mode=True, linewidth=120); an
/// undefined tensor is None.
///
/// \code
/// tracetorch::python_repr(torch::arange(3));  // "tensor([0, 1, 2])"
/// \endcode
inline std::string python_repr(const torch::Tensor& tensor) { return detail::tensor_repr(tensor); }

/// print(tensor) as lines (str.splitlines()).
///
/// \code
/// for (const auto& line : tracetorch::python_print_lines(x)) std::cout << line << "\n";
/// \endcode
inline std::vector<std::string> python_print_lines(const torch::Tensor& tensor) { return detail::tensor_print_lines(tensor); }

}  // namespace tracetorch
