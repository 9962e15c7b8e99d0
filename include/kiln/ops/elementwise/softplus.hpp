// kiln/ops/elementwise/softplus.hpp — log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/expr/glsl.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/exp.hpp"

namespace kiln {
namespace detail {

/// log(1 + t) for t in [0, 1] in GLSL, which has no log1p (log(1.0 + t) loses t's low bits
/// in 1.0 + t: 4e-4 relative at t = e^-10, and 0 below e^-17):
///   log(1 + t) = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...),  s = t / (2 + t) in [0, 1/3],
/// seven terms of the series (the first left out is s^14/15 <= 1.4e-8 relative). No
/// cancellation anywhere, so nothing an optimiser reassociates can cost accuracy.
inline std::string log1p_unit_glsl() {
  std::array<float, 6> c{};
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = 1.0f / static_cast<float>(2 * k + 3);  // 1/3, 1/5, ... 1/13
  return "float kiln_log1p_unit(float t) {\n"
         "  float s = t / (2.0 + t);\n"
         "  float s2 = s * s;\n"
         "  float u = 2.0 * s;\n"
         "  return fma(u * s2, " + glsl_horner(c, "s2") + ", u);\n"
         "}\n";
}

}  // namespace detail

struct softplus_op {
  static constexpr std::string_view name = "softplus";
  static constexpr int cost = 56;  // work hint (detail::op_cost_v): exp and xsimd's log1p
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::abs, std::log1p;
    return select(a < V(0.0f), V(0.0f), a) + log1p(detail::exp_approx(-abs(a)));
  }
  static constexpr std::string_view glsl = "(max({0}, 0.0) + kiln_log1p_unit(kiln_exp(-abs({0}))))";
  static std::vector<std::string> glsl_functions() { return {detail::exp_glsl(), detail::log1p_unit_glsl()}; }
};

/// Elementwise log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::softplus(x);`
template <expression X>
auto softplus(X&& x) {
  return map<softplus_op>(std::forward<X>(x));
}

}  // namespace kiln
