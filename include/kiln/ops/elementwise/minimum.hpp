// kiln/ops/elementwise/minimum.hpp — kiln::min, the elementwise minimum; a NaN in
// either operand gives NaN (like numpy.minimum / torch.minimum).
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct min_op {
  static constexpr std::string_view name = "min";
  template <class V>
  static V apply(const V& a, const V& b) {
    const V m = select(b < a, b, a);
    if constexpr (std::is_floating_point_v<scalar_of_t<V>>) return select(is_nan(a) || is_nan(b), a + b, m);
    else return m;
  }
  static constexpr std::string_view glsl = "((isnan({0}) || isnan({1})) ? ({0} + {1}) : min({0}, {1}))";
  static constexpr std::string_view glsl_int = "min({0}, {1})";
};

/// Elementwise minimum with broadcasting; NaN-propagating. Example: `y = kiln::min(x, 6.0f);`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto min(L&& a, R&& b) {
  return map<min_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
