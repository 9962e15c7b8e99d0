// kiln/ops/elementwise/leaky_relu.hpp — x for x >= 0, alpha * x below; NaN stays NaN.
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct leaky_relu_op {
  static constexpr std::string_view name = "leaky_relu";
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a, const V& alpha) {
    return select(a < V(0.0f), alpha * a, a);
  }
  static constexpr std::string_view glsl = "({0} < 0.0 ? {1} * {0} : {0})";
};

/// Leaky ReLU; alpha is a run-time scalar (a push constant on Vulkan: changing it
/// reuses the kernel). Floating dtypes. Example: `y = kiln::leaky_relu(x, 0.01f);`
template <expression X>
auto leaky_relu(X&& x, float alpha = 0.01f) {
  return map<leaky_relu_op>(std::forward<X>(x), alpha);
}

}  // namespace kiln
