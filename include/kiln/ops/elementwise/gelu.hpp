// kiln/ops/elementwise/gelu.hpp — GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/ops/elementwise/erf.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct gelu_op {
  static constexpr std::string_view name = "gelu";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    return V(0.5f) * a * (V(1.0f) + detail::erf_approx(a * V(0.70710678118654752f)));
  }
  static constexpr std::string_view glsl = "(0.5 * {0} * (1.0 + kiln_erf({0} * 0.70710678118654752)))";
};

/// Elementwise GELU with the exact erf form: x/2 * (1 + erf(x / sqrt(2))). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::gelu(a * b + c);`
template <expression X>
auto gelu(X&& x) {
  return map<gelu_op>(std::forward<X>(x));
}

}  // namespace kiln
