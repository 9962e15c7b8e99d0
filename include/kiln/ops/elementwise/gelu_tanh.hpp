// kiln/ops/elementwise/gelu_tanh.hpp — GELU, tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <string>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/ops/elementwise/tanh.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct gelu_tanh_op {
  static constexpr std::string_view name = "gelu_tanh";
  static constexpr int cost = 16;  // work hint (detail::op_cost_v): tanh's rational fit and a cubic
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return V(0.5f) * a * (V(1.0f) + detail::tanh_approx(V(0.79788456080286536f) * (a + V(0.044715f) * a * a * a)));
  }
  static constexpr std::string_view glsl = "(0.5 * {0} * (1.0 + kiln_tanh(0.79788456080286536 * ({0} + 0.044715 * {0} * {0} * {0}))))";
  static std::string glsl_functions() { return detail::tanh_glsl(); }
};

/// Elementwise GELU, tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::gelu_tanh(x);`
template <expression X>
auto gelu_tanh(X&& x) {
  return map<gelu_tanh_op>(std::forward<X>(x));
}

}  // namespace kiln
