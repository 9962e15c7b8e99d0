// kiln/expr/impl/layout.ipp — definitions of kiln/expr/layout.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/expr/layout.hpp"

namespace kiln::detail {

KILN_DECL dim_order dim_order::axis_last(int r, int axis) {
  dim_order p;
  p.rank = r;
  int k = 0;
  for (int d = 0; d < r; ++d)
    if (d != axis) p.order[k++] = d;
  p.order[k] = axis;
  return p;
}

}  // namespace kiln::detail
