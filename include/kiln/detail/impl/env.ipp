// kiln/detail/impl/env.ipp — definitions of kiln/detail/env.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/detail/env.hpp"

namespace kiln::detail {

KILN_DECL bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string_view(v) == "0" || std::string_view(v) == "false" || std::string_view(v) == "off");
}

KILN_DECL bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && !env_off(name);
}

}  // namespace kiln::detail
