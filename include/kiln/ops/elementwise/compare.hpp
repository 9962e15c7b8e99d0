// kiln/ops/elementwise/compare.hpp — comparisons ==, !=, <, <=, >, >= yielding masks.
// A mask feeds kiln::where, or is stored as 0/1 in a uint8_t tensor. NaN compares
// unequal to everything (x != NaN is true, every other comparison false), as IEEE says.
#pragma once

#include <utility>

#include "kiln/expr/lanes.hpp"
#include "kiln/expr/node.hpp"

namespace kiln {

#define KILN_COMPARISON(op_name, sym, glsl_sym)                                   \
  struct op_name##_op {                                                           \
    static constexpr std::string_view name = #op_name;                            \
    static constexpr bool yields_mask = true;                                     \
    template <class V>                                                            \
    static auto apply(const V& a, const V& b) {                                   \
      return a sym b;                                                             \
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
KILN_COMPARISON(eq, ==, "==")
KILN_COMPARISON(ne, !=, "!=")
KILN_COMPARISON(lt, <, "<")
KILN_COMPARISON(le, <=, "<=")
KILN_COMPARISON(gt, >, ">")
KILN_COMPARISON(ge, >=, ">=")
#undef KILN_COMPARISON

}  // namespace kiln
