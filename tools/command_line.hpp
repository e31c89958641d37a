#pragma once
/// \file
/// The command-line reading the tools share (tracetorch-diff, tracetorch-scan-skipped): the
/// library's own (detail/program/command_line.hpp, which the trace programs use), under the
/// names the tools know. No LibTorch: the scanner builds without it.

#include "tracetorch/detail/program/command_line.hpp"

namespace tracetorch::command_line {

using detail::command_line::ArgumentReader;
using detail::command_line::parse_number;
using detail::command_line::run_program;
using detail::command_line::UsageError;

}  // namespace tracetorch::command_line
