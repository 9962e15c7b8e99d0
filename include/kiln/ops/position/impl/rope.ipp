// kiln/ops/position/impl/rope.ipp — definitions of kiln/ops/position/rope.hpp
// (inline in the header-only mode, compiled once in kiln::runtime / kiln::vulkan_runtime
// otherwise; see kiln/detail/config.hpp).
#pragma once

#include "kiln/ops/position/rope.hpp"

namespace kiln::detail {

KILN_DECL std::vector<float> rope_inv_freq(float theta, index_t dim) {
  std::vector<float> f(static_cast<std::size_t>(dim / 2));
  for (index_t i = 0; i < dim / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    f[static_cast<std::size_t>(i)] = 1.0f / std::pow(theta, e);
  }
  return f;
}

}  // namespace kiln::detail
