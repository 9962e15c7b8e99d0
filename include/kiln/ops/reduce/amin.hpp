// kiln/ops/reduce/amin.hpp — kiln::amin (and one-argument kiln::min): the smallest element
// over an axis or all elements (see amax.hpp for why two-argument min is elementwise).
#pragma once

#include <utility>

#include "kiln/ops/reduce/reducer.hpp"

namespace kiln {

/// Minimum over `axis` (negative counts from the end); keepdims keeps the axis as extent
/// 1. A NaN in a line gives NaN; an empty axis gives +inf (integers: their largest value).
template <expression X>
auto amin(X&& x, int axis, bool keepdims = false) {
  return reduce<min_reducer>(std::forward<X>(x), axis, keepdims);
}

/// Minimum of all elements, a rank-0 result.
template <expression X>
auto amin(X&& x) {
  return reduce<min_reducer>(std::forward<X>(x));
}

/// Minimum of all elements (the one-argument form of kiln::min).
template <expression X>
auto min(X&& x) {
  return reduce<min_reducer>(std::forward<X>(x));
}

}  // namespace kiln
