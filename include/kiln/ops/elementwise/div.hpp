// kiln/ops/elementwise/div.hpp — a / b. Floats follow IEEE (x/0 = ±inf, 0/0 = NaN);
// integers truncate toward zero, x/0 = 0 and INT_MIN/-1 wraps (no trap, no UB).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct div_op {
  static constexpr std::string_view name = "div";
  static constexpr int cost = 2;  // work hint (detail::op_cost_v): a vector division
  static std::int32_t int_div(std::int32_t a, std::int32_t b) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(a));
    return a / b;
  }
  template <class V>
  static V apply(const V& a, const V& b) {
    if constexpr (std::is_floating_point_v<scalar_of_t<V>>) {
      return a / b;
    } else {
      return per_lane(int_div, a, b);  // no vector integer division; avoids the x/0 trap
    }
  }
  static constexpr std::string_view glsl = "({0} / {1})";
  static constexpr std::string_view glsl_int = "({1} == 0 ? 0 : ({1} == -1 ? -{0} : {0} / {1}))";
};

/// Elementwise quotient with broadcasting. Example: `y = x / 3.0f;`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto operator/(L&& a, R&& b) {
  return map<div_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
