// kiln/ops/elementwise/gelu_tanh.hpp — GELU, tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
//
// Evaluated as  x/2 (1 + tanh(u)) = x sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3),  u has
// the sign of x; with t = e^(-2|u|) in (0, 1]:
//   x >= 0:  x / (1 + t)        x < 0:  x t / (1 + t)
// 1 + tanh(u) is never formed, so the negative tail keeps its relative accuracy (1 + tanh
// cancelled to a relative error of 9 near x = -5.2), and e^(-2u) is never taken where it
// would overflow (x / inf would give 0 for results still above FLT_MIN, near x = -10.1).
// t rounds to 0 for very negative x, giving -0; +inf gives inf, -inf gives NaN (-inf * 0,
// as the formula does). -2|u| is w (a + b w^2), w = |x|, a = -2 sqrt(2/pi), b = a * 0.044715.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/expr/glsl.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/exp.hpp"

namespace kiln {
namespace detail {

inline constexpr double gelu_tanh_k = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr float gelu_tanh_a = static_cast<float>(-2.0 * gelu_tanh_k);
inline constexpr float gelu_tanh_b = static_cast<float>(-2.0 * gelu_tanh_k * 0.044715);

}  // namespace detail

struct gelu_tanh_op {
  static constexpr std::string_view name = "gelu_tanh";
  static constexpr int cost = 16;  // work hint (detail::op_cost_v): tanh's rational fit and a cubic
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& x) {
    using std::abs;
    const V w = abs(x);
    const V t = detail::exp_approx(w * detail::fmadd(V(detail::gelu_tanh_b), w * w, V(detail::gelu_tanh_a)));  // e^(-2|u|)
    return (x * select(x < V(0.0f), t, V(1.0f))) / (V(1.0f) + t);
  }
  static constexpr std::string_view glsl = "kiln_gelu_tanh({0})";
  static std::vector<std::string> glsl_functions() {
    using detail::glsl_float;
    return {detail::exp_glsl(),
            "float kiln_gelu_tanh(float x) {\n"
            "  float w = abs(x);\n"
            "  float t = kiln_exp(w * fma(" + glsl_float(detail::gelu_tanh_b) + ", w * w, " + glsl_float(detail::gelu_tanh_a) + "));  // e^(-2|u|)\n"
            "  return (x * (x < 0.0 ? t : 1.0)) / (1.0 + t);\n"
            "}\n"};
  }
};

/// Elementwise GELU, tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))),
/// with small relative error on both sides. Dtypes: f32, f16, bf16 (integers fail to
/// compile: cast first). Example: `y = kiln::gelu_tanh(x);`
template <expression X>
auto gelu_tanh(X&& x) {
  return map<gelu_tanh_op>(std::forward<X>(x));
}

}  // namespace kiln
