// kiln/ops/elementwise/sigmoid.hpp — logistic function 1 / (1 + e^-x).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/exp.hpp"

namespace kiln {

struct sigmoid_op {
  static constexpr std::string_view name = "sigmoid";
  static constexpr int cost = 12;  // work hint (detail::op_cost_v): exp and a division
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return V(1.0f) / (V(1.0f) + detail::exp_approx(-a));
  }
  static constexpr std::string_view glsl = "(1.0 / (1.0 + kiln_exp(-{0})))";
  static std::string glsl_functions() { return detail::exp_glsl(); }
};

/// Elementwise logistic function 1 / (1 + e^-x). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::sigmoid(x);`
template <expression X>
auto sigmoid(X&& x) {
  return map<sigmoid_op>(std::forward<X>(x));
}

}  // namespace kiln
