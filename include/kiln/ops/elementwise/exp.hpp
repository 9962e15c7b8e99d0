// kiln/ops/elementwise/exp.hpp — e raised to x, as a branch-free range reduction and a
// polynomial that vectorises well (within 1 ulp over the whole float range):
//   e^x = 2^n e^r,  n = round(x / ln 2),  r = x - n ln 2 (|r| <= ln(2)/2, ln 2 in two parts),
//   e^r ~= 1 + r + r^2 P(r), P of degree 4 (coefficients from scripts/fit_exp.py),
// then 2^n applied exactly (detail::scale_by_pow2), so that results stay finite up to
// ln(FLT_MAX) = 88.7228, overflow to inf beyond, and pass through the subnormals to 0 at
// about -103.97. The same formula runs in SIMD lanes, scalar tails and GLSL (kiln_exp);
// sigmoid, silu and softplus evaluate it too.
#pragma once

#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/expr/glsl.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {
namespace detail {

/// e^r ~= 1 + r + r^2 (p[0] + p[1] r + ... + p[4] r^4) on |r| <= ln(2)/2.
inline constexpr std::array<float, 5> exp_pf = {4.999999404e-01f, 1.666652113e-01f, 4.166838899e-02f,
                                                8.368710056e-03f, 1.381461043e-03f};
inline constexpr float exp_log2e = 1.44269504088896341f;
/// ln 2 = exp_ln2_hi + exp_ln2_lo; exp_ln2_hi has 9 significant bits, so n * exp_ln2_hi is
/// exact for every n the clamp below allows.
inline constexpr float exp_ln2_hi = 0.693359375f;
inline constexpr float exp_ln2_lo = -2.121944417e-04f;
/// Arguments are clamped to [exp_min_arg, exp_max_arg]: e^x is inf in float above, and
/// rounds to 0 below; the clamp keeps n in [-150, 128], the range scale_by_pow2 takes.
inline constexpr float exp_max_arg = 89.0f;
inline constexpr float exp_min_arg = -104.0f;

template <class V>
V exp_approx(const V& x) {
  using std::nearbyint;
  const V c = min_keep_nan(V(exp_max_arg), max_keep_nan(V(exp_min_arg), x));  // NaN stays NaN
  const V n = nearbyint(c * V(exp_log2e));
  const V r = fmadd(n, V(-exp_ln2_lo), fmadd(n, V(-exp_ln2_hi), c));
  const V er = fmadd(r * r, horner(r, exp_pf), r) + V(1.0f);
  return scale_by_pow2(er, n);
}

/// The same formula in GLSL: kiln_exp, for every op that takes e^x on the device (a
/// driver's exp() is only held to 3 + 2|x| ulp). 2^n is two exact powers of two built
/// from exponent bits, as on CPUs without AVX-512; a device may flush subnormal results.
/// The reduction is two `precise` multiply-subtracts, not nested fma() calls: lavapipe
/// folds fma(n, -lo, fma(n, -hi, c)) into one fma with hi + lo rounded to float, which
/// costs up to 4.1e-6 relative at |x| ~ 72 (measured); this spelling keeps 1.4e-7 there.
inline std::string exp_glsl() {
  return "float kiln_exp(float x) {\n"
         "  float c = clamp(x, " + glsl_float(exp_min_arg) + ", " + glsl_float(exp_max_arg) + ");\n"
         "  float n = roundEven(c * " + glsl_float(exp_log2e) + ");\n"
         "  precise float t = c - n * " + glsl_float(exp_ln2_hi) + ";  // exact\n"
         "  precise float r = t + n * " + glsl_float(-exp_ln2_lo) + ";\n"
         "  float e = fma(r * r, " + glsl_horner(exp_pf, "r") + ", r) + 1.0;\n"
         "  float h = floor(n * 0.5);\n"
         "  e = e * intBitsToFloat((int(h) + 127) << 23) * intBitsToFloat((int(n - h) + 127) << 23);\n"
         "  return isnan(x) ? x : e;\n"
         "}\n";
}

}  // namespace detail

struct exp_op {
  static constexpr std::string_view name = "exp";
  static constexpr int cost = 10;  // work hint (detail::op_cost_v): range reduction and a degree-4 polynomial
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return detail::exp_approx(a);
  }
  static constexpr std::string_view glsl = "kiln_exp({0})";
  static std::string glsl_functions() { return detail::exp_glsl(); }
};

/// Elementwise e raised to x (within 1 ulp; overflows to inf above 88.7228). Dtypes: f32,
/// f16, bf16 (integers fail to compile: cast first). Example: `y = kiln::exp(x);`
template <expression X>
auto exp(X&& x) {
  return map<exp_op>(std::forward<X>(x));
}

}  // namespace kiln
