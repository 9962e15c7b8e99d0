// kiln/ops/elementwise/softplus.hpp — log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|).
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

struct softplus_op {
  static constexpr std::string_view name = "softplus";
  static constexpr int cost = 56;  // work hint (detail::op_cost_v): exp and xsimd's log1p
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::abs, std::log1p;
    return select(a < V(0.0f), V(0.0f), a) + log1p(detail::exp_approx(-abs(a)));
  }
  static constexpr std::string_view glsl = "(max({0}, 0.0) + log(1.0 + kiln_exp(-abs({0}))))";
  static std::string glsl_functions() { return detail::exp_glsl(); }
};

/// Elementwise log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::softplus(x);`
template <expression X>
auto softplus(X&& x) {
  return map<softplus_op>(std::forward<X>(x));
}

}  // namespace kiln
