#pragma once
/// \file
/// Forwards to detail/text/python_json.hpp, where the JSON writer now lives (kept so that
/// existing includes of this path keep working; new code includes the detail/text/ header).

#include "tracetorch/detail/text/python_json.hpp"
