// kiln/expr/impl/structural.ipp — definitions of kiln/expr/structural.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/expr/structural.hpp"

namespace kiln::detail {

KILN_DECL int normalize_axis(std::string_view op, int axis, const kiln::shape& s, const std::string& input) {
  const int r = std::max(s.rank(), 1);  // a rank-0 input has one axis of extent 1, as in PyTorch
  if (axis < -r || axis >= r) {
    throw shape_error("kiln::" + std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " + input +
                      " (valid: " + std::to_string(-r) + " .. " + std::to_string(r - 1) + ")");
  }
  return axis < 0 ? axis + r : axis;
}

KILN_DECL kiln::shape reduced_shape(const kiln::shape& in, int axis, bool all, bool keepdims) {
  kiln::shape out;
  for (int d = 0; d < in.rank(); ++d) {
    if (all || d == axis) {
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(in[d]);
    }
  }
  return out;
}

}  // namespace kiln::detail
