// kiln/ops/reduce/sum.hpp — kiln::sum over an axis or all elements.
#pragma once

#include <utility>

#include "kiln/ops/reduce/reducer.hpp"

namespace kiln {

/// Sum over `axis` (negative counts from the end); keepdims keeps the axis as extent 1.
/// f16/bf16 accumulate in float; integers and masks accumulate and give int32. Over an
/// empty axis: 0. Fuses: `r = kiln::sum(kiln::square(x - y), -1) * 0.5f` is one kernel.
template <expression X>
auto sum(X&& x, int axis, bool keepdims = false) {
  return reduce<sum_reducer>(std::forward<X>(x), axis, keepdims);
}

/// Sum of all elements, a rank-0 result. Example: `auto total = kiln::empty<float>(ctx, {}); total = kiln::sum(x);`
template <expression X>
auto sum(X&& x) {
  return reduce<sum_reducer>(std::forward<X>(x));
}

}  // namespace kiln
