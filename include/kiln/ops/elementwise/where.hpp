// kiln/ops/elementwise/where.hpp — where(m, a, b): a where the mask m is true, else b.
#pragma once

#include <type_traits>
#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

struct where_op {
  static constexpr std::string_view name = "where";
  static constexpr std::size_t condition_operands = 1;  // scalars adopt a's / b's dtype, not m's
  template <class M, class A, class B>
  using result_type = typename detail::common_value<A, B>::type;

  template <class M, class V>
  static V apply(const M& m, const V& a, const V& b) {
    return select(m, a, b);
  }
  static constexpr std::string_view glsl = "({0} ? {1} : {2})";
};

/// Chooses lane by lane: a where m is true, else b. m is a mask (a comparison) or an
/// integer expression (non-zero = true); a and b are expressions or scalars of one dtype
/// (two scalars: float for floating literals, int32_t for integers).
/// Example: `y = kiln::where(x > 0.0f, x, 0.0f);`
template <expression M, operand A, operand B>
auto where(M&& m, A&& a, B&& b) {
  using mv = typename detail::node_t<M>::value_type;
  static_assert(std::is_same_v<mv, bool> || !is_floating_v<mv>,
                "kiln::where: the condition must be a mask (a comparison) or an integer tensor");
  return map<where_op>(std::forward<M>(m), std::forward<A>(a), std::forward<B>(b));
}

}  // namespace kiln
