// kiln/expr/impl/glsl.ipp — definitions of kiln/expr/glsl.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/expr/glsl.hpp"

namespace kiln::detail {

KILN_DECL std::string glsl_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9e", static_cast<double>(v));
  return buf;
}

}  // namespace kiln::detail
