// kiln/ops/elementwise/relu.hpp — max(x, 0); NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct relu_op {
  static constexpr std::string_view name = "relu";
  template <class V>
  static V apply(const V& a) {
    return select(a < V(0), V(0), a);
  }
  static constexpr std::string_view glsl = "({0} < {T}(0) ? {T}(0) : {0})";
};

/// Elementwise max(x, 0); NaN stays NaN. Dtypes: any.
/// Example: `y = kiln::relu(w * x + b);`
template <expression X>
auto relu(X&& x) {
  return map<relu_op>(std::forward<X>(x));
}

}  // namespace kiln
