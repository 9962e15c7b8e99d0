// kiln/ops/elementwise/tanh.hpp — hyperbolic tangent, as a branch-free rational
// approximation (max relative error ~4.4e-7 over all floats):
//   tanh(x) = x * P(x^2) / Q(x^2) for |x| < 9; beyond, tanh rounds to ±1 in float.
// Coefficients from scripts/fit_rational.py; the GLSL spelling uses the same formula.
#pragma once

#include <cmath>
#include <string_view>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {
namespace detail {

template <class V>
V tanh_approx(const V& x) {
  using std::fma;
  const V c = select(x < V(-9.0f), V(-9.0f), select(V(9.0f) < x, V(9.0f), x));  // NaN stays NaN
  const V t = c * c;
  V p = V(8.521138761e-10f);
  p = fma(p, t, V(1.342871881e-06f));
  p = fma(p, t, V(2.261101841e-04f));
  p = fma(p, t, V(7.953805427e-03f));
  p = fma(p, t, V(3.142073201e-02f));
  p = fma(p, t, V(-1.588731673e-01f));
  p = fma(p, t, V(9.999999957e-01f));
  V q = V(5.025660470e-08f);
  q = fma(q, t, V(2.144024475e-05f));
  q = fma(q, t, V(1.631351422e-03f));
  q = fma(q, t, V(2.407407976e-02f));
  q = fma(q, t, V(-4.375895260e-02f));
  q = fma(q, t, V(1.744600569e-01f));
  q = fma(q, t, V(1.0f));
  // |tanh| <= 1 exactly: the fit's few-ulp error near ±1 must not step outside
  const V r = c * divide_approx(p, q);
  return select(r <= V(-1.0f), V(-1.0f), select(V(1.0f) <= r, V(1.0f), r));
}

/// The same formula in GLSL (prepended to generated shaders that use kiln_tanh).
inline constexpr std::string_view tanh_glsl = R"(float kiln_tanh(float x) {
  float c = x < -9.0 ? -9.0 : (9.0 < x ? 9.0 : x);
  float t = c * c;
  float num = fma(fma(fma(fma(fma(fma(8.521138761e-10, t, 1.342871881e-06), t, 2.261101841e-04), t,
                7.953805427e-03), t, 3.142073201e-02), t, -1.588731673e-01), t, 9.999999957e-01);
  float den = fma(fma(fma(fma(fma(fma(5.025660470e-08, t, 2.144024475e-05), t, 1.631351422e-03), t,
                2.407407976e-02), t, -4.375895260e-02), t, 1.744600569e-01), t, 1.0);
  float r = c * num / den;
  return isnan(r) ? r : clamp(r, -1.0, 1.0);
}
)";

}  // namespace detail

struct tanh_op {
  static constexpr std::string_view name = "tanh";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return detail::tanh_approx(a);
  }
  static constexpr std::string_view glsl = "kiln_tanh({0})";
};

/// Elementwise hyperbolic tangent (max relative error ~4.4e-7). Dtypes: f32, f16, bf16
/// (integers fail to compile: cast first). Example: `y = kiln::tanh(x);`
template <expression X>
auto tanh(X&& x) {
  return map<tanh_op>(std::forward<X>(x));
}

}  // namespace kiln
