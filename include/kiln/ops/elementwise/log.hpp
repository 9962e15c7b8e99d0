// kiln/ops/elementwise/log.hpp — natural logarithm (log 0 = -inf, log of a negative = NaN).
//
// On the CPU xsimd's log. In GLSL kiln's own (log_glsl): the builtin `log` is only held to
// 2^-21 absolute error for arguments in [0.5, 2] (the Vulkan spec's precision table), which
// near 1 is no relative accuracy at all: log(1 + 2.6e-4) came out 1e-4 off, relative, on
// an NVIDIA H200. kiln's: x = m 2^k with m in [sqrt(1/2), sqrt 2), f = m - 1 (exact), and
//   log(1 + f) = 2 atanh(s) = 2s + s R(s^2),  s = f / (2 + f),  R(z) = 2 (z/3 + z^2/5 + ...),
//   2s = f - f^2/2 + s f^2/2  (exactly, as s (2 + f) = f),
// so log x = k ln2 + f - f^2/2 + s (f^2/2 + R): f - f^2/2 carries the result and the
// division's error only reaches the small last term. Within about 1 ulp over the whole
// range, subnormal arguments too (where the device keeps them).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {
namespace detail {

/// float kiln_log(float x): the natural logarithm with relative accuracy everywhere (see
/// above). R(z) is atanh's series to z^4: the next term, 2 z^5 / 11 with s^2 = z <= 0.0295,
/// moves the result by under 1e-9 of it.
inline std::string log_glsl() {
  return "float kiln_log(float x) {\n"
         "  bool tiny = x < 1.17549435e-38;  // subnormal: scaled by 2^24 first\n"
         "  int b = floatBitsToInt(tiny ? x * 16777216.0 : x);\n"
         "  int k = (b - 0x3f3504f3) >> 23;  // 0x3f3504f3: sqrt(1/2); m = x / 2^k in [sqrt(1/2), sqrt 2)\n"
         "  float f = intBitsToFloat(b - (k << 23)) - 1.0;  // exact\n"
         "  float fk = float(k) - (tiny ? 24.0 : 0.0);\n"
         "  float s = f / (2.0 + f);\n"
         "  float z = s * s;\n"
         "  float r = z * (0.6666666666666667 + z * (0.4 + z * (0.2857142857142857 + z * 0.2222222222222222)));\n"
         "  float hf = 0.5 * f * f;\n"
         "  precise float y = s * (hf + r) + fk * -2.12194440e-4;  // k ln2 = k (ln2_hi + ln2_lo)\n"
         "  y = ((y - hf) + f) + fk * 0.693359375;  // ln2_hi = 0.693359375: k ln2_hi exact\n"
         "  const float inf = uintBitsToFloat(0x7f800000u);\n"
         "  if (!(x > 0.0)) y = x == 0.0 ? -inf : uintBitsToFloat(0x7fc00000u);  // negative or NaN: NaN\n"
         "  return x == inf ? inf : y;\n"
         "}\n";
}

}  // namespace detail

struct log_op {
  static constexpr std::string_view name = "log";
  static constexpr int cost = 19;  // work hint (detail::op_cost_v): xsimd's log
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::log;
    return log(a);
  }
  static constexpr std::string_view glsl = "kiln_log({0})";
  static std::string glsl_functions() { return detail::log_glsl(); }
};

/// Elementwise natural logarithm (log 0 = -inf, log of a negative = NaN). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::log(x);`
template <expression X>
auto log(X&& x) {
  return map<log_op>(std::forward<X>(x));
}

}  // namespace kiln
