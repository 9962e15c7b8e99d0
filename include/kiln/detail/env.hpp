// kiln/detail/env.hpp — reading kiln's on/off environment switches (KILN_CACHE,
// KILN_VULKAN_VALIDATION, KILN_HUGE_PAGES, ...) one way everywhere.
#pragma once

#include <cstdlib>
#include <string_view>

#include "kiln/detail/config.hpp"

namespace kiln::detail {

/// True when the variable is set to 0, false or off (a switch that defaults to on).
KILN_DECL bool env_off(const char* name);

/// True when the variable is set to anything but 0, false or off (a switch that defaults to off).
KILN_DECL bool env_flag(const char* name);

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/detail/impl/env.ipp"
#endif
