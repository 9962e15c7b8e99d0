// kiln/ops/elementwise/tanh.hpp — hyperbolic tangent, as a branch-free rational
// approximation (max relative error ~4.4e-7 over all floats):
//   tanh(x) = x * P(x^2) / Q(x^2) for |x| < 9; beyond, tanh rounds to ±1 in float.
// Coefficients from scripts/fit_rational.py; the GLSL spelling uses the same formula.
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

/// tanh(x) ~= x P(x^2) / Q(x^2) on |x| <= tanh_fit_limit, Q(0) = 1.
inline constexpr std::array<float, 7> tanh_pf = {9.999999957e-01f, -1.588731673e-01f, 3.142073201e-02f, 7.953805427e-03f,
                                                 2.261101841e-04f, 1.342871881e-06f,  8.521138761e-10f};
inline constexpr std::array<float, 7> tanh_qf = {1.0f,             1.744600569e-01f, -4.375895260e-02f, 2.407407976e-02f,
                                                 1.631351422e-03f, 2.144024475e-05f, 5.025660470e-08f};
inline constexpr float tanh_fit_limit = 9.0f;

template <class V>
V tanh_approx(const V& x) {
  const V c = min_keep_nan(V(tanh_fit_limit), max_keep_nan(V(-tanh_fit_limit), x));  // NaN stays NaN
  const V t = c * c;
  // |tanh| <= 1 exactly: the fit's few-ulp error near ±1 must not step outside
  const V r = (c * horner(t, tanh_pf)) / horner(t, tanh_qf);
  return min_keep_nan(V(1.0f), max_keep_nan(V(-1.0f), r));
}

/// The same formula in GLSL: kiln_tanh, for ops whose GLSL body calls it.
inline std::string tanh_glsl() {
  return "float kiln_tanh(float x) {\n"
         "  float c = clamp(x, -" + glsl_float(tanh_fit_limit) + ", " + glsl_float(tanh_fit_limit) + ");\n"
         "  float t = c * c;\n"
         "  float r = c * " + glsl_horner(tanh_pf, "t") + "\n"
         "              / " + glsl_horner(tanh_qf, "t") + ";\n"
         "  return isnan(x) ? x : clamp(r, -1.0, 1.0);\n"
         "}\n";
}

}  // namespace detail

struct tanh_op {
  static constexpr std::string_view name = "tanh";
  static constexpr int cost = 9;  // work hint (detail::op_cost_v): a rational fit: two polynomials and a division
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return detail::tanh_approx(a);
  }
  static constexpr std::string_view glsl = "kiln_tanh({0})";
  static std::string glsl_functions() { return detail::tanh_glsl(); }
};

/// Elementwise hyperbolic tangent (max relative error ~4.4e-7). Dtypes: f32, f16, bf16
/// (integers fail to compile: cast first). Example: `y = kiln::tanh(x);`
template <expression X>
auto tanh(X&& x) {
  return map<tanh_op>(std::forward<X>(x));
}

}  // namespace kiln
