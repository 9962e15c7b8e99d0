// kiln/ops/elementwise/square.hpp — x * x (integers wrap).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct square_op {
  static constexpr std::string_view name = "square";
  template <class V>
  static V apply(const V& a) {
    if constexpr (std::is_same_v<V, std::int32_t>) {
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(a));
    } else {
      return a * a;
    }
  }
  static constexpr std::string_view glsl = "({0} * {0})";
};

/// Elementwise x * x (integers wrap). Dtypes: any.
/// Example: `y = kiln::square(x - mean);`
template <expression X>
auto square(X&& x) {
  return map<square_op>(std::forward<X>(x));
}

}  // namespace kiln
