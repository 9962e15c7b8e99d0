// kiln/ops/elementwise/silu.hpp — x * sigmoid(x) (a.k.a. swish).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

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
    return a / (V(1.0f) + detail::exp_approx(-a));
  }
  static constexpr std::string_view glsl = "({0} / (1.0 + kiln_exp(-{0})))";
  static std::string glsl_functions() { return detail::exp_glsl(); }
};

/// Elementwise x * sigmoid(x) (a.k.a. swish). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::silu(a) * b;`
template <expression X>
auto silu(X&& x) {
  return map<silu_op>(std::forward<X>(x));
}

}  // namespace kiln
