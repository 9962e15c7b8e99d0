// kiln/ops/reduce/argmax.hpp — kiln::argmax and kiln::argmin: the index of the largest /
// smallest element along an axis (or in the flattened tensor), as int32.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "kiln/expr/structural.hpp"

namespace kiln {
namespace detail {

/// Index of the extreme element: the first one on ties; a NaN counts as the extreme
/// (the first NaN's index), as in PyTorch. Largest: argmax, else argmin.
template <bool Largest>
struct arg_extreme_op {
  static constexpr std::string_view name = Largest ? "argmax" : "argmin";
  static constexpr structural_family family = structural_family::reduce;
  static constexpr bool largest = Largest;
  template <class In>
  using result_type = std::int32_t;
};

template <bool Largest, class X>
auto make_arg_extreme(X&& x, int axis, bool all, bool keepdims) {
  auto n = make_structural(arg_extreme_op<Largest>{}, std::forward<X>(x), {.axis = axis, .all = all, .keepdims = keepdims});
  const axis_split s = n.split();
  if (s.extent == 0 && s.outer * s.inner > 0) {
    throw shape_error("kiln::" + std::string(arg_extreme_op<Largest>::name) + ": the axis of " + n.arg.describe() +
                      " is empty; there is no index to return");
  }
  if (s.extent > index_t(INT32_MAX)) {
    throw shape_error("kiln::" + std::string(arg_extreme_op<Largest>::name) + ": " + n.arg.describe() +
                      " has more elements along the axis than an int32 index can name");
  }
  return n;
}

}  // namespace detail

/// Index (int32) of the largest element along `axis`; keepdims keeps the axis as extent 1.
/// Ties give the first index, a NaN counts as largest. An empty axis throws kiln::shape_error.
template <expression X>
auto argmax(X&& x, int axis, bool keepdims = false) {
  return detail::make_arg_extreme<true>(std::forward<X>(x), axis, false, keepdims);
}

/// Index (int32) of the largest element of the flattened x, a rank-0 result.
template <expression X>
auto argmax(X&& x) {
  return detail::make_arg_extreme<true>(std::forward<X>(x), 0, true, false);
}

/// Index (int32) of the smallest element along `axis` (ties: first; NaN counts as smallest).
template <expression X>
auto argmin(X&& x, int axis, bool keepdims = false) {
  return detail::make_arg_extreme<false>(std::forward<X>(x), axis, false, keepdims);
}

/// Index (int32) of the smallest element of the flattened x, a rank-0 result.
template <expression X>
auto argmin(X&& x) {
  return detail::make_arg_extreme<false>(std::forward<X>(x), 0, true, false);
}

}  // namespace kiln
