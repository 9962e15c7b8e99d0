// kiln/ops/elementwise/erf.hpp — the error function, as a branch-free rational
// approximation that vectorises well (max relative error ~3.3e-7 over all floats):
//   erf(x) = x * P(x^2) / Q(x^2) for |x| < 3.92; beyond, erf(x) rounds to ±1 in float.
// Coefficients from scripts/fit_rational.py. The same formula runs in SIMD lanes, scalar
// tails and GLSL (kiln_erf), so every backend rounds alike.
#pragma once

#include <cmath>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {
namespace detail {

template <class V>
V erf_approx(const V& x) {
  using std::fma;
  const V c = select(x < V(-4.0f), V(-4.0f), select(V(4.0f) < x, V(4.0f), x));  // NaN stays NaN
  const V t = c * c;
  V p = V(-1.336023885e-08f);
  p = fma(p, t, V(4.715110270e-06f));
  p = fma(p, t, V(3.808589942e-04f));
  p = fma(p, t, V(3.856478083e-03f));
  p = fma(p, t, V(5.435400415e-02f));
  p = fma(p, t, V(1.852799982e-01f));
  p = fma(p, t, V(1.128379168e+00f));
  V q = V(6.340349108e-05f);
  q = fma(q, t, V(1.310691098e-03f));
  q = fma(q, t, V(1.547984330e-02f));
  q = fma(q, t, V(1.140140140e-01f));
  q = fma(q, t, V(4.975335208e-01f));
  q = fma(q, t, V(1.0f));
  // beyond 3.92, erf rounds to ±1 in float: return it exactly (the fit is 3e-7 off there)
  return select(c <= V(-3.92f), V(-1.0f), select(V(3.92f) <= c, V(1.0f), c * divide_approx(p, q)));
}

/// The same formula in GLSL (prepended to generated shaders that use kiln_erf).
inline constexpr std::string_view erf_glsl = R"(float kiln_erf(float x) {
  float c = x < -4.0 ? -4.0 : (4.0 < x ? 4.0 : x);
  float t = c * c;
  float num = fma(fma(fma(fma(fma(fma(-1.336023885e-08, t, 4.715110270e-06), t, 3.808589942e-04), t,
                3.856478083e-03), t, 5.435400415e-02), t, 1.852799982e-01), t, 1.128379168e+00);
  float den = fma(fma(fma(fma(fma(6.340349108e-05, t, 1.310691098e-03), t, 1.547984330e-02), t,
                1.140140140e-01), t, 4.975335208e-01), t, 1.0);
  return c <= -3.92 ? -1.0 : (3.92 <= c ? 1.0 : c * num / den);
}
)";

}  // namespace detail

struct erf_op {
  static constexpr std::string_view name = "erf";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return detail::erf_approx(a);
  }
  static constexpr std::string_view glsl = "kiln_erf({0})";
};

/// Elementwise error function (max relative error ~3.3e-7). Dtypes: f32, f16, bf16.
/// Example: `y = kiln::erf(x);`
template <expression X>
auto erf(X&& x) {
  return map<erf_op>(std::forward<X>(x));
}

}  // namespace kiln
