// kiln/ops/elementwise/mul.hpp — a * b (integers wrap).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct mul_op {
  static constexpr std::string_view name = "mul";
  template <class V>
  static V apply(const V& a, const V& b) {
    if constexpr (std::is_same_v<V, std::int32_t>) {
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));
    } else {
      return a * b;
    }
  }
  static constexpr std::string_view glsl = "({0} * {1})";
};

/// Elementwise product with broadcasting. Example: `y = w * x;`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto operator*(L&& a, R&& b) {
  return map<mul_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
