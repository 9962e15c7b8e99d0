// kiln/ops/norm/rms_norm.hpp — kiln::rms_norm over the last axis (Llama's RMSNorm).
#pragma once

#include <utility>

#include "kiln/ops/norm/layer_norm.hpp"

namespace kiln {

/// RMS normalisation over the last axis, as Llama's RMSNorm: x / sqrt(mean(x^2) + eps) *
/// weight, eps inside the square root; weight a tensor of shape [N] (any floating dtype).
/// Fuses like kiln::layer_norm.
template <expression X, detail::norm_param W>
auto rms_norm(X&& x, W&& weight, float eps = 1e-6f) {
  return detail::make_norm<true>(std::forward<X>(x), eps, std::forward<W>(weight));
}

/// RMS normalisation over the last axis without a weight.
template <expression X>
auto rms_norm(X&& x, float eps = 1e-6f) {
  return detail::make_norm<true>(std::forward<X>(x), eps);
}

}  // namespace kiln
