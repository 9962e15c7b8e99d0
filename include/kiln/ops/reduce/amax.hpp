// kiln/ops/reduce/amax.hpp — kiln::amax (and one-argument kiln::max): the largest element
// over an axis or all elements. Two-argument kiln::max(a, b) stays the elementwise
// maximum (`kiln::max(x, 0)` is relu-like, never a reduction over axis 0): reductions over
// an axis are spelled amax, as torch.amax / numpy.amax.
#pragma once

#include <utility>

#include "kiln/ops/reduce/reducer.hpp"

namespace kiln {

/// Maximum over `axis` (negative counts from the end); keepdims keeps the axis as extent
/// 1. A NaN in a line gives NaN; an empty axis gives -inf (integers: their lowest value).
template <expression X>
auto amax(X&& x, int axis, bool keepdims = false) {
  return reduce<max_reducer>(std::forward<X>(x), axis, keepdims);
}

/// Maximum of all elements, a rank-0 result.
template <expression X>
auto amax(X&& x) {
  return reduce<max_reducer>(std::forward<X>(x));
}

/// Maximum of all elements (the one-argument form of kiln::max).
template <expression X>
auto max(X&& x) {
  return reduce<max_reducer>(std::forward<X>(x));
}

}  // namespace kiln
