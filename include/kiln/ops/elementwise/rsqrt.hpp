// kiln/ops/elementwise/rsqrt.hpp — 1 / sqrt(x), correctly rounded division (not the hardware estimate).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct rsqrt_op {
  static constexpr std::string_view name = "rsqrt";
  static constexpr int cost = 7;  // work hint (detail::op_cost_v): a square root and a division
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::sqrt;
    return V(1.0f) / sqrt(a);
  }
  static constexpr std::string_view glsl = "inversesqrt({0})";
};

/// Elementwise 1 / sqrt(x), correctly rounded division (not the hardware estimate). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::rsqrt(var + 1e-5f);`
template <expression X>
auto rsqrt(X&& x) {
  return map<rsqrt_op>(std::forward<X>(x));
}

}  // namespace kiln
