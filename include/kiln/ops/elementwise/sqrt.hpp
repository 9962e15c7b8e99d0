// kiln/ops/elementwise/sqrt.hpp — square root (negative -> NaN).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct sqrt_op {
  static constexpr std::string_view name = "sqrt";
  static constexpr int cost = 3;  // work hint (detail::op_cost_v): a vector square root
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::sqrt;
    return sqrt(a);
  }
  static constexpr std::string_view glsl = "sqrt({0})";
};

/// Elementwise square root (negative -> NaN). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::sqrt(x);`
template <expression X>
auto sqrt(X&& x) {
  return map<sqrt_op>(std::forward<X>(x));
}

}  // namespace kiln
