// kiln/ops/elementwise/neg.hpp — unary minus (integers wrap).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct neg_op {
  static constexpr std::string_view name = "neg";
  template <class V>
  static V apply(const V& a) {
    if constexpr (std::is_same_v<V, std::int32_t>) {
      return static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(a));
    } else if constexpr (std::is_floating_point_v<scalar_of_t<V>>) {
      // -0 - a is -a for every a, zeros included (-0 - +0 = -0, -0 - -0 = +0); not the
      // batch's unary minus: xsimd spells it 0 - a on AVX-512, and 0 - +0 is +0, so SIMD
      // lanes and scalar tails disagreed on the sign of -(+0)
      return V(-0.0f) - a;
    } else {
      return -a;
    }
  }
  static constexpr std::string_view glsl = "(-{0})";
};

/// Elementwise negation. Example: `y = -x;`
template <expression X>
auto operator-(X&& x) {
  return map<neg_op>(std::forward<X>(x));
}

}  // namespace kiln
