// kiln/ops/elementwise/erf.hpp — the error function, as a branch-free rational
// approximation that vectorises well (max relative error ~4.1e-7 over all floats):
//   erf(x) = x * P(x^2) / Q(x^2) for |x| < 3.92; beyond, erf(x) rounds to ±1 in float.
// Coefficients from scripts/fit_rational.py (P and Q of degree 5). The same formula runs
// in SIMD lanes, scalar tails and GLSL (kiln_erf), so every backend rounds alike; gelu.hpp
// evaluates it with the argument scaling folded into the coefficients.
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

/// erf(x) ~= x P(x^2) / Q(x^2) on |x| <= erf_fit_limit, Q(0) = 1.
inline constexpr std::array<double, 6> erf_p = {1.128379159e+00, 1.916702857e-01, 5.285226088e-02,
                                                3.803309210e-03, 2.828315696e-04, 2.001508760e-06};
inline constexpr std::array<double, 6> erf_q = {1.000000000e+00, 5.031962638e-01, 1.145738426e-01,
                                                1.504592545e-02, 1.166349061e-03, 3.748328598e-05};
/// The fit's domain; arguments beyond it are clamped (their results are replaced anyway).
inline constexpr float erf_fit_limit = 4.0f;
/// From here on erf(x) rounds to ±1 in float; the fit is ~3e-7 off there, so ±1 is exact.
inline constexpr float erf_saturation = 3.92f;

/// The coefficients c[k] * scale / divisor^k, in float: P and Q for an argument x / s.
template <std::size_t N>
constexpr std::array<float, N> scaled_coefficients(const std::array<double, N>& c, double scale, double divisor) {
  std::array<float, N> r{};
  double d = 1.0;
  for (std::size_t k = 0; k < N; ++k, d *= divisor) r[k] = static_cast<float>(c[k] * scale / d);
  return r;
}

inline constexpr auto erf_pf = scaled_coefficients(erf_p, 1.0, 1.0);
inline constexpr auto erf_qf = scaled_coefficients(erf_q, 1.0, 1.0);

template <class V>
V erf_approx(const V& x) {
  using std::abs;
  using std::copysign;
  const V a = abs(x);
  const V c = min_keep_nan(V(erf_fit_limit), a);  // NaN stays NaN
  const V t = c * c;
  const V e = (c * horner(t, erf_pf)) / horner(t, erf_qf);
  return copysign(select(V(erf_saturation) <= a, V(1.0f), e), x);
}

/// The same formula in GLSL: kiln_erf, for ops whose GLSL body calls it.
inline std::string erf_glsl() {
  return "float kiln_erf(float x) {\n"
         "  float a = abs(x);\n"
         "  float c = min(a, " + glsl_float(erf_fit_limit) + ");\n"
         "  float t = c * c;\n"
         "  float e = mix(c * " + glsl_horner(erf_pf, "t") + "\n"
         "                  / " + glsl_horner(erf_qf, "t") + ",\n"
         "                1.0, " + glsl_float(erf_saturation) + " <= a);  // a select, not a branch\n"
         "  return isnan(x) ? x : (x < 0.0 ? -e : e);\n"
         "}\n";
}

}  // namespace detail

struct erf_op {
  static constexpr std::string_view name = "erf";
  static constexpr int cost = 9;  // work hint (detail::op_cost_v): a rational fit: two polynomials and a division
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return detail::erf_approx(a);
  }
  static constexpr std::string_view glsl = "kiln_erf({0})";
  static std::string glsl_functions() { return detail::erf_glsl(); }
};

/// Elementwise error function (max relative error ~4.1e-7). Dtypes: f32, f16, bf16.
/// Example: `y = kiln::erf(x);`
template <expression X>
auto erf(X&& x) {
  return map<erf_op>(std::forward<X>(x));
}

}  // namespace kiln
