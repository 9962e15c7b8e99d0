// kiln/ops/elementwise/abs.hpp — absolute value (integers: INT_MIN stays INT_MIN).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct abs_op {
  static constexpr std::string_view name = "abs";
  template <class V>
  static V apply(const V& a) {
    if constexpr (std::is_same_v<V, std::int32_t>) {
      return a < 0 ? static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(a)) : a;
    } else if constexpr (std::is_integral_v<scalar_of_t<V>>) {
      // Not the vector abs: GCC 12 folds zero-extend (u8 load) + vpabsd + truncate (u8
      // store) into vpabsb, turning u8 200 into 56. A select is not folded that way.
      return select(a < V(0), V(0) - a, a);
    } else {
      using std::abs;
      return abs(a);
    }
  }
  static constexpr std::string_view glsl = "abs({0})";
};

/// Elementwise absolute value (integers: INT_MIN stays INT_MIN). Dtypes: any.
/// Example: `y = kiln::abs(x);`
template <expression X>
auto abs(X&& x) {
  return map<abs_op>(std::forward<X>(x));
}

}  // namespace kiln
