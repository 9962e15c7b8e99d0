// kiln/ops/elementwise/maximum.hpp — kiln::max, the elementwise maximum; a NaN in
// either operand gives NaN (like numpy.maximum / torch.maximum).
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct max_op {
  static constexpr std::string_view name = "max";
  template <class V>
  static V apply(const V& a, const V& b) {
    const V m = select(a < b, b, a);
    if constexpr (std::is_floating_point_v<scalar_of_t<V>>) return select(is_nan(a) || is_nan(b), a + b, m);
    else return m;
  }
  static constexpr std::string_view glsl = "((isnan({0}) || isnan({1})) ? ({0} + {1}) : max({0}, {1}))";
  static constexpr std::string_view glsl_int = "max({0}, {1})";
};

/// Elementwise maximum with broadcasting; NaN-propagating. Example: `y = kiln::max(x, 0.0f);`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto max(L&& a, R&& b) {
  return map<max_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
