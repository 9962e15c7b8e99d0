// kiln/ops/elementwise/pow.hpp — a raised to b (IEEE pow rules: pow(x, 0) = 1, ...).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/exp.hpp"
#include "kiln/ops/elementwise/log.hpp"

namespace kiln {

struct pow_op {
  static constexpr std::string_view name = "pow";
  static constexpr int cost = 70;  // work hint (detail::op_cost_v): log, exp and the special cases
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a, const V& b) {
    if constexpr (std::is_floating_point_v<V>) {
      using std::pow;
      return pow(a, b);  // the C library follows the IEEE special cases
    } else {
      // Vector pow (xsimd's is the same exp(b * log|a|)) with the sign and the IEEE special
      // cases put back; xsimd's own gives pow(0, 0) = 0, pow(-0, -2) = 0, pow(-inf, 0.5) = NaN.
      using std::abs, std::copysign, std::floor, std::isinf, std::log;
      const V zero(0.0f), one(1.0f);
      const auto b_int = floor(b) == b && !isinf(b);
      const auto b_odd = b_int && floor(b * V(0.5f)) != b * V(0.5f);
      // kiln's exp, not xsimd's: xsimd's gives inf from e^88.38 on, 22% below FLT_MAX
      // (pow(3e38, 1) was inf); log(0) = -inf and log(inf) = inf give 0 / inf
      const V m = detail::exp_approx(b * log(abs(a)));
      const V r = select(b_odd, copysign(m, a), m);
      const auto invalid = a < zero && !isinf(a) && !b_int && !isinf(b);  // NaN: negative ** fraction
      const auto unit = b == zero || a == one || (a == -one && isinf(b));
      return select(unit, one, select(invalid, V(std::numeric_limits<float>::quiet_NaN()), r));
    }
  }
  static constexpr std::string_view glsl = "kiln_pow({0}, {1})";
  /// C pow's special cases (GLSL leaves pow undefined for x < 0, and x = 0 with y <= 0);
  /// e^(y log|x|) as on the CPU, with kiln's exp and log: GLSL's log2 near 1 is held only
  /// to an absolute error, which y multiplies into the result's relative error.
  static std::vector<std::string> glsl_functions() {
    return {detail::exp_glsl(), detail::log_glsl(), std::string(pow_glsl)};
  }
  static constexpr std::string_view pow_glsl = R"(float kiln_pow(float x, float y) {
  const float inf = uintBitsToFloat(0x7f800000u);
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  float ax = abs(x);
  if (ax == 1.0 && isinf(y)) return 1.0;
  bool neg = (floatBitsToUint(x) & 0x80000000u) != 0u;
  bool y_int = !isinf(y) && floor(y) == y;
  bool y_odd = y_int && mod(y, 2.0) == 1.0;
  float r;
  if (ax == 0.0) r = y > 0.0 ? 0.0 : inf;
  else if (isinf(ax)) r = y > 0.0 ? inf : 0.0;
  else if (isinf(y)) r = (ax > 1.0) == (y > 0.0) ? inf : 0.0;
  else {
    if (neg && !y_int) return uintBitsToFloat(0x7fc00000u);
    r = kiln_exp(y * kiln_log(ax));
  }
  return neg && y_odd ? -r : r;
}
)";
};

/// Elementwise power with broadcasting; either side may be a scalar. Floating dtypes.
/// Example: `y = kiln::pow(x, 3.0f);`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto pow(L&& a, R&& b) {
  return map<pow_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
