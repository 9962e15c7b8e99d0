// kiln/ops/elementwise/add.hpp — a + b (integers wrap).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct add_op {
  static constexpr std::string_view name = "add";
  template <class V>
  static V apply(const V& a, const V& b) {
    if constexpr (std::is_same_v<V, std::int32_t>) {  // scalar ints: wrap like the SIMD lanes do
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
    } else {
      return a + b;
    }
  }
  static constexpr std::string_view glsl = "({0} + {1})";
};

/// Elementwise sum with broadcasting; any dtype (both operands the same dtype; scalars adapt).
/// Throws kiln::shape_error when shapes do not broadcast. Example: `y = x + 1.0f;`
template <operand L, operand R>
  requires(expression<L> || expression<R>)
auto operator+(L&& a, R&& b) {
  return map<add_op>(std::forward<L>(a), std::forward<R>(b));
}

}  // namespace kiln
