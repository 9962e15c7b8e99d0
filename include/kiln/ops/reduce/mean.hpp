// kiln/ops/reduce/mean.hpp — kiln::mean over an axis or all elements.
#pragma once

#include <utility>

#include "kiln/ops/reduce/reducer.hpp"

namespace kiln {

/// Mean over `axis` (negative counts from the end); keepdims keeps the axis as extent 1.
/// Floating-point dtypes (f16/bf16 accumulate in float). Over an empty axis: NaN.
/// Example: `n = kiln::sqrt(kiln::mean(kiln::square(x), -1) + 1e-6f);` (one kernel)
template <expression X>
auto mean(X&& x, int axis, bool keepdims = false) {
  return reduce<mean_reducer>(std::forward<X>(x), axis, keepdims);
}

/// Mean of all elements, a rank-0 result.
template <expression X>
auto mean(X&& x) {
  return reduce<mean_reducer>(std::forward<X>(x));
}

}  // namespace kiln
