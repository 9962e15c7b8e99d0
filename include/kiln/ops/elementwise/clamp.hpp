// kiln/ops/elementwise/clamp.hpp — x limited to [lo, hi]; NaN stays NaN.
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct clamp_op {
  static constexpr std::string_view name = "clamp";
  template <class V>
  static V apply(const V& x, const V& lo, const V& hi) {
    return select(x < lo, lo, select(hi < x, hi, x));
  }
  static constexpr std::string_view glsl = "({0} < {1} ? {1} : ({2} < {0} ? {2} : {0}))";
};

/// Elementwise clamp; lo and hi are scalars or expressions (broadcast). Any dtype.
/// Example: `y = kiln::clamp(x, -1.0f, 1.0f);`
template <expression X, operand Lo, operand Hi>
auto clamp(X&& x, Lo&& lo, Hi&& hi) {
  return map<clamp_op>(std::forward<X>(x), std::forward<Lo>(lo), std::forward<Hi>(hi));
}

}  // namespace kiln
