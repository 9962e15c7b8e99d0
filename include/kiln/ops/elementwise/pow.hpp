// kiln/ops/elementwise/pow.hpp — a raised to b (IEEE pow rules: pow(x, 0) = 1, ...).
#pragma once

#include <cmath>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct pow_op {
  static constexpr std::string_view name = "pow";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a, const V& b) {
    using std::pow;
    return pow(a, b);
  }
  static constexpr std::string_view glsl = "kiln_pow({0}, {1})";
};

/// Elementwise power with broadcasting; either side may be a scalar. Floating dtypes.
/// Example: `y = kiln::pow(x, 3.0f);`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto pow(L&& a, R&& b) {
  return map<pow_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
