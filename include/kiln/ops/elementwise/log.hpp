// kiln/ops/elementwise/log.hpp — natural logarithm (log 0 = -inf, log of a negative = NaN).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct log_op {
  static constexpr std::string_view name = "log";
  static constexpr int cost = 19;  // work hint (detail::op_cost_v): xsimd's log
  static constexpr bool floating_only = true;
  template <class V>
  static V apply(const V& a) {
    using std::log;
    return log(a);
  }
  static constexpr std::string_view glsl = "log({0})";
};

/// Elementwise natural logarithm (log 0 = -inf, log of a negative = NaN). Dtypes: f32, f16, bf16 (integers fail to compile: cast first).
/// Example: `y = kiln::log(x);`
template <expression X>
auto log(X&& x) {
  return map<log_op>(std::forward<X>(x));
}

}  // namespace kiln
