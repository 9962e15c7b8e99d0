// kiln/detail/env.hpp — reading kiln's on/off environment switches (KILN_CACHE,
// KILN_VULKAN_VALIDATION, KILN_HUGE_PAGES, ...) one way everywhere.
#pragma once

#include <cstdlib>
#include <string_view>

namespace kiln::detail {

/// True when the variable is set to 0, false or off (a switch that defaults to on).
inline bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string_view(v) == "0" || std::string_view(v) == "false" || std::string_view(v) == "off");
}

/// True when the variable is set to anything but 0, false or off (a switch that defaults to off).
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && !env_off(name);
}

}  // namespace kiln::detail
