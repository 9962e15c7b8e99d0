// kiln/ops/elementwise/tanh.hpp — hyperbolic tangent.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct tanh_op {
  static constexpr std::string_view name = "tanh";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::tanh;
    return tanh(a);
  }
  static constexpr std::string_view glsl = "tanh({0})";
};

/// Elementwise hyperbolic tangent. Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::tanh(x);`
template <expression X>
auto tanh(X&& x) {
  return map<tanh_op>(std::forward<X>(x));
}

}  // namespace kiln
