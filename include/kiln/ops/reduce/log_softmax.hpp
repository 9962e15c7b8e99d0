// kiln/ops/reduce/log_softmax.hpp — kiln::log_softmax along an axis.
#pragma once

#include <utility>

#include "kiln/ops/reduce/softmax.hpp"

namespace kiln {

/// log(softmax(x)) along `axis` (default: the last), computed as x - max - log(sum(exp(x -
/// max))) (no log of a rounded-to-zero probability). NaN/inf rules as kiln::softmax.
template <expression X>
auto log_softmax(X&& x, int axis = -1) {
  return detail::make_softmax<true>(std::forward<X>(x), axis);
}

}  // namespace kiln
