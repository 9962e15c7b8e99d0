// kiln/ops/elementwise/gelu.hpp — GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))).
//
// Evaluated as  gelu(x) = x/2 + |x| * e,  e = erf(|x| / sqrt(2)) / 2  (x erf(x/sqrt 2) is
// even), with erf's rational (erf.hpp) taken in x directly: the 1/sqrt(2) and the 1/2 are
// folded into its coefficients. No sign fix-up, no 1 + erf step, and the final fused
// multiply-add rounds once, which keeps the cancellation for x < 0 small. Beyond the
// saturation point e is exactly 1/2, so gelu(x) is exactly x for large x and exactly 0
// for very negative x (NaN for -inf, as the formula gives).
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/expr/glsl.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/erf.hpp"

namespace kiln {
namespace detail {

inline constexpr double sqrt2 = 1.4142135623730950488;
/// erf(x/sqrt 2)/2 ~= x P(x^2) / Q(x^2): erf's fit with x -> x/sqrt(2), t -> t/2, times 1/2.
inline constexpr auto gelu_pf = scaled_coefficients(erf_p, 0.5 / sqrt2, 2.0);
inline constexpr auto gelu_qf = scaled_coefficients(erf_q, 1.0, 2.0);
inline constexpr float gelu_fit_limit = static_cast<float>(erf_fit_limit * sqrt2);
inline constexpr float gelu_saturation = static_cast<float>(erf_saturation * sqrt2);

}  // namespace detail

struct gelu_op {
  static constexpr std::string_view name = "gelu";
  static constexpr int cost = 9;  // work hint (detail::op_cost_v): erf's rational fit and two multiply-adds
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& x) {
    using detail::horner;
    using std::abs;
    using std::fma;
    const V a = abs(x);
    const V c = detail::min_keep_nan(V(detail::gelu_fit_limit), a);  // NaN stays NaN
    const V t = c * c;
    const V e = (c * horner(t, detail::gelu_pf)) / horner(t, detail::gelu_qf);  // erf(c/sqrt 2)/2
    return fma(a, select(V(detail::gelu_saturation) <= a, V(0.5f), e), V(0.5f) * x);
  }
  static constexpr std::string_view glsl = "kiln_gelu({0})";
  static std::string glsl_functions() {
    using detail::glsl_float;
    using detail::glsl_horner;
    return "float kiln_gelu(float x) {\n"
           "  float a = abs(x);\n"
           "  float c = min(a, " + glsl_float(detail::gelu_fit_limit) + ");\n"
           "  float t = c * c;\n"
           "  float e = mix(c * " + glsl_horner(detail::gelu_pf, "t") + "\n"
           "                  / " + glsl_horner(detail::gelu_qf, "t") + ",\n"
           "                0.5, " + glsl_float(detail::gelu_saturation) + " <= a);  // a select, not a branch\n"
           "  return fma(a, e, 0.5 * x);  // NaN x: a is NaN, whatever GLSL's min made of c\n"
           "}\n";
  }
};

/// Elementwise GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::gelu(a * b + c);`
template <expression X>
auto gelu(X&& x) {
  return map<gelu_op>(std::forward<X>(x));
}

}  // namespace kiln
