// kiln/ops/elementwise/gelu.hpp — GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))).
//
// Evaluated as  gelu(x) = x Phi(x),  Phi(-w) = erfc(w / sqrt 2) / 2 = e^(-w^2/2) R(w)  (w = |x|),
// with R a smooth, bounded factor (R(0) = 1/2, R(w) ~ 1 / (w sqrt(2 pi))) fitted as a
// rational P(w) / Q(w) (scripts/fit_gelu.py):
//   x < 0:   gelu(x) = (x R(w)) e^(-w^2/2)       small relative error down to FLT_MIN
//   x >= 0:  gelu(x) = x (1 - R(w) e^(-w^2/2))   1 - ... is in [1/2, 1]: no cancellation
// 1 + erf(x / sqrt 2) is never formed, so the negative tail does not cancel (it lost all
// relative accuracy near x = -5.5 that way). e^(-w^2/2) amplifies an absolute error of
// w^2/2 into a relative one of the result, so w^2 is carried as h + l (exact, one fma)
// and e^(-(h + l)/2) = e^(-h/2) (1 - l/2). Beyond w = 15 e^(-w^2/2) is 0 in float, so
// gelu(x) is exactly x for large x, -0 for very negative x, NaN for -inf (as the formula
// gives: -inf * 0).
#pragma once

#include <array>
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

/// R(w) = erfc(w / sqrt 2) / 2 * e^(w^2/2) ~= P(w) / Q(w) on [0, gelu_tail_limit], Q(0) = 1
/// (3.8e-7 relative in float).
inline constexpr std::array<float, 5> gelu_rp = {5.000000039e-01f, 4.415093735e-01f, 1.856600980e-01f,
                                                 4.146265394e-02f, 4.242550934e-03f};
inline constexpr std::array<float, 6> gelu_rq = {1.0f,             1.680903852e+00f, 1.212481405e+00f,
                                                 4.758812799e-01f, 1.039370418e-01f, 1.063439819e-02f};
/// |x| is clamped here: e^(-w^2/2) already rounds to 0 (kiln's exp is 0 below -103.97),
/// and w^2 stays finite for huge or infinite x.
inline constexpr float gelu_tail_limit = 15.0f;
/// -log2(e) / 2: n = round(h * gelu_half_log2e) for e^(-h/2) = 2^n e^(s/2).
inline constexpr float gelu_half_log2e = -0.721347520444481703f;
/// e^(s/2) ~= 1 + s (g[0] + g[1] s + ... + g[4] s^4) on |s| <= ln 2 (1.5e-7 relative in
/// float; scripts/fit_gelu.py). The argument -(h + l)/2 is never positive and never below
/// -112.5, so the reduction needs no clamps; at -112.5, 2^n (n = -162) rounds to 0 as
/// e^(-112.5) does.
inline constexpr std::array<float, 5> gelu_exp = {4.999998510e-01f, 1.249978766e-01f, 2.083454467e-02f,
                                                  2.618620638e-03f, 2.590722870e-04f};

}  // namespace detail

struct gelu_op {
  static constexpr std::string_view name = "gelu";
  static constexpr int cost = 9;  // work hint (detail::op_cost_v): erf's rational fit and two multiply-adds
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& x) {
    using detail::fmadd;
    using detail::horner;
    using std::abs;
    using std::nearbyint;
    const V c = detail::min_keep_nan(V(detail::gelu_tail_limit), abs(x));  // NaN stays NaN
    const V h = c * c;
    const V l = detail::square_error(c, h);  // c^2 = h + l exactly
    // e^(-(h + l)/2) = 2^n e^(s/2): n = round(-h/2 log2 e), s = -h - 2n ln 2 - l (the
    // first step exact: 2n ln2_hi has 18 bits and s is small), e^(s/2) one polynomial
    const V n = nearbyint(h * V(detail::gelu_half_log2e));
    V s = fmadd(n, V(-2.0f * detail::exp_ln2_hi), -h);
    s = fmadd(n, V(-2.0f * detail::exp_ln2_lo), s) - l;
    const V e = detail::scale_by_pow2(fmadd(s, horner(s, detail::gelu_exp), V(1.0f)), n);
    const V q = detail::divide_approx(horner(c, detail::gelu_rp), horner(c, detail::gelu_rq));
    // x q first: e is then normal wherever the result is (x q -> -0.4 for large |x|);
    // x > 0: x - x Phi(-x), whose subtrahend is at most x / 2 (no cancellation). x is
    // capped as c is (e = 0 there), so that +inf gives inf - 0, not inf - inf * 0
    const V v = (detail::min_keep_nan(V(detail::gelu_tail_limit), x) * q) * e;
    return select(x <= V(0.0f), v, x - v);  // -0 and +0 kept: v is x times a positive value
  }
  static constexpr std::string_view glsl = "kiln_gelu({0})";
  static std::vector<std::string> glsl_functions() {
    using detail::glsl_float;
    using detail::glsl_horner;
    // c^2 = h + l without fma: on lavapipe fma(c, c, -h) lost l (4.2e-6 relative at
    // x = -11.5, measured); the split is `precise`, so it is not folded away either
    return {detail::exp_glsl(),
            "float kiln_gelu(float x) {\n"
            "  float c = min(abs(x), " + glsl_float(detail::gelu_tail_limit) + ");\n"
            "  precise float p = c * 4097.0;  // c = ch + cl, 12 bits each (Veltkamp): products exact\n"
            "  precise float ch = p - (p - c);\n"
            "  precise float cl = c - ch;\n"
            "  precise float h = c * c;\n"
            "  precise float l = ((ch * ch - h) + 2.0 * ch * cl) + cl * cl;  // c^2 = h + l exactly\n"
            "  float e = kiln_exp(-0.5 * h);\n"
            "  e = fma(e, -0.5 * l, e);\n"
            "  float r = " + glsl_horner(detail::gelu_rp, "c") + "\n"
            "          / " + glsl_horner(detail::gelu_rq, "c") + ";\n"
            "  // a select, not a branch; NaN x: x < 0 is false and x * ... is NaN\n"
            "  return mix(x * fma(-r, e, 1.0), (x * r) * e, x < 0.0);\n"
            "}\n"};
  }
};

/// Elementwise GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))), with small
/// relative error on both sides (see above). Dtypes: f32, f16, bf16 (integers fail to
/// compile: cast first). Example: `y = kiln::gelu(a * b + c);`
template <expression X>
auto gelu(X&& x) {
  return map<gelu_op>(std::forward<X>(x));
}

}  // namespace kiln
