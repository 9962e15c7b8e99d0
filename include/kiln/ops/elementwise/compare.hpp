// kiln/ops/elementwise/compare.hpp — comparisons ==, !=, <, <=, >, >= yielding masks.
// A mask feeds kiln::where, or is stored as 0/1 in a uint8_t tensor. NaN compares
// unequal to everything (x != NaN is true, every other comparison false), as IEEE says.
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

#define KILN_COMPARISON(op_name, sym, glsl_sym, body)                             \
  struct op_name##_op {                                                           \
    static constexpr std::string_view name = #op_name;                            \
    static constexpr bool yields_mask = true;                                     \
    template <class V>                                                            \
    static auto apply(const V& a, const V& b) {                                   \
      return body;                                                                \
    }                                                                             \
    static constexpr std::string_view glsl = "({0} " glsl_sym " {1})";            \
  };                                                                              \
  template <operand L, operand R>                                                 \
    requires(expression<L> || expression<R>)                                      \
  auto operator sym(L&& a, R&& b) {                                               \
    return map<op_name##_op>(std::forward<L>(a), std::forward<R>(b));             \
  }

/// Elementwise comparisons with broadcasting, yielding masks.
/// Example: `auto m = x > 0.0f; y = kiln::where(m, x, 0.1f * x);`
KILN_COMPARISON(eq, ==, "==", a == b)
// != is spelled !(a == b): xsimd's AVX and AVX-512 batch != is the ordered compare
// (_CMP_NEQ_OQ), false when either side is NaN, where IEEE (and the scalar tail) say true.
KILN_COMPARISON(ne, !=, "!=", !(a == b))
KILN_COMPARISON(lt, <, "<", a < b)
KILN_COMPARISON(le, <=, "<=", a <= b)
KILN_COMPARISON(gt, >, ">", a > b)
KILN_COMPARISON(ge, >=, ">=", a >= b)
#undef KILN_COMPARISON

}  // namespace kiln
