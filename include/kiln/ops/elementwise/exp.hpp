// kiln/ops/elementwise/exp.hpp — e raised to x.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct exp_op {
  static constexpr std::string_view name = "exp";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::exp;
    return exp(a);
  }
  static constexpr std::string_view glsl = "exp({0})";
};

/// Elementwise e raised to x. Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::exp(x);`
template <expression X>
auto exp(X&& x) {
  return map<exp_op>(std::forward<X>(x));
}

}  // namespace kiln
