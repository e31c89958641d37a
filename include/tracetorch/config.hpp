#pragma once
/// \file
/// The configuration macros, all in one place. Define them before the first tracetorch include,
/// the same in every translation unit of a program (as doctest's DOCTEST_CONFIG_* macros).
///
/// - `TRACETORCH_DISABLE`: tracing compiled out. `TRACEABLE` gives LibTorch's plain holder with
///   the same call operators, the debugger and capture become no-ops that still compile
///   (the test "TRACETORCH_DISABLE compiles tracing out" shows it).
/// - `TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES`: `TRACEABLE` is left undefined; use
///   `TRACETORCH_TRACEABLE` (the compile-error test no_short_macro_names shows it).
///
/// \code
/// #define TRACETORCH_CONFIG_NO_SHORT_MACRO_NAMES
/// #include <tracetorch/tracetorch.hpp>
/// struct MlpImpl : torch::nn::Module { torch::Tensor forward(torch::Tensor x) { return x; } };
/// TRACETORCH_TRACEABLE(Mlp);
/// \endcode
