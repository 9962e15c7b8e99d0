// kiln/ops/elementwise/silu.hpp — x * sigmoid(x) (a.k.a. swish).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/ops/elementwise/exp.hpp"

namespace kiln {

struct silu_op {
  static constexpr std::string_view name = "silu";
  static constexpr int cost = 14;  // work hint (detail::op_cost_v): exp and a division
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    // e = e^-|x| never overflows: x / (1 + e^-x) for x >= 0 and x e^x / (1 + e^x) below,
    // so the tail keeps its value down to the subnormals (x / (1 + e^-x) is -0 from
    // x = -88.7 on, where the result is still ~1e-37)
    using std::abs;
    const V e = detail::exp_approx(-abs(a));
    return select(a < V(0.0f), a * e, a) / (V(1.0f) + e);
  }
  static constexpr std::string_view glsl = "kiln_silu({0})";
  static std::vector<std::string> glsl_functions() {
    return {detail::exp_glsl(),
            "float kiln_silu(float x) {\n"
            "  float e = kiln_exp(-abs(x));\n"
            "  return (x < 0.0 ? x * e : x) / (1.0 + e);\n"
            "}\n"};
  }
};

/// Elementwise x * sigmoid(x) (a.k.a. swish). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::silu(a) * b;`
template <expression X>
auto silu(X&& x) {
  return map<silu_op>(std::forward<X>(x));
}

}  // namespace kiln
