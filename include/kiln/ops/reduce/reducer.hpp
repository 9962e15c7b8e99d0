// kiln/ops/reduce/reducer.hpp — the reducer protocol, the built-in reducers, and
// kiln::reduce<R>, which applies any reducer (yours too) over an axis or all elements.
//
// A reducer is one struct, in the style of an elementwise op:
//   name                         "sum"
//   identity<V>()                the value of an empty reduction (V: a scalar or SIMD batch)
//   combine(a, b)                merges two partial results; associative (kernels reorder)
//   glsl_identity, glsl          the same in GLSL; {0}, {1} are the operands, {T} the type
//   (optional) glsl_identity_int, glsl_int   integer spellings, where they differ
//   (optional) finalize(acc, n)  the result from the combined value and the count n
//   (optional) glsl_finalize     its GLSL: {0} the value, {1} the count (a float)
//   (optional) result_type<In>   the output dtype for an input dtype (default: In)
// Accumulation runs in the compute type: float for f32/f16/bf16 (f16/bf16 results are
// rounded once, at the end), int32 for integer inputs (and masks).
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/dtype.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/expr/structural.hpp"
#include "kiln/ops/elementwise/maximum.hpp"
#include "kiln/ops/elementwise/minimum.hpp"

namespace kiln {

/// Sum; integers and masks accumulate (and give) int32, which wraps like int32 arithmetic.
struct sum_reducer {
  static constexpr std::string_view name = "sum";
  template <class In>
  using result_type = std::conditional_t<is_floating_v<In>, In, std::int32_t>;
  template <class V>
  static V identity() { return V(0); }
  template <class V>
  static V combine(const V& a, const V& b) { return a + b; }
  static constexpr std::string_view glsl_identity = "{T}(0)";
  static constexpr std::string_view glsl = "({0} + {1})";
};

/// Mean: the sum over the count (0 / 0 = NaN over an empty axis, as in PyTorch).
/// Floating-point inputs only.
struct mean_reducer : sum_reducer {
  static constexpr std::string_view name = "mean";
  static constexpr bool floating_only = true;
  template <class In>
  using result_type = In;
  template <class V>
  static V finalize(const V& acc, index_t n) { return acc / V(static_cast<float>(n)); }
  // GLSL's division may be off by 2.5 ulp (NVIDIA's is): one fma correction step makes
  // it the rounded quotient, so the mean of equal values is that value
  static constexpr std::string_view glsl_finalize =
      "((isinf({0} / {1}) || {0} / {1} == 0.0) ? {0} / {1} : fma(fma(-({0} / {1}), {1}, {0}), 1.0 / {1}, {0} / {1}))";
};

/// Maximum; a NaN anywhere gives NaN. Empty: -inf (integers: the type's lowest value).
struct max_reducer {
  static constexpr std::string_view name = "amax";
  template <class V>
  static V identity() {
    using S = scalar_of_t<V>;
    if constexpr (std::is_floating_point_v<S>) return V(-std::numeric_limits<S>::infinity());
    else return V(std::numeric_limits<S>::lowest());
  }
  template <class V>
  static V combine(const V& a, const V& b) { return max_op::apply(a, b); }
  static constexpr std::string_view glsl_identity = "uintBitsToFloat(0xff800000u)";
  static constexpr std::string_view glsl_identity_int = "int(0x80000000u)";
  static constexpr std::string_view glsl = max_op::glsl;
  static constexpr std::string_view glsl_int = max_op::glsl_int;
};

/// Minimum; a NaN anywhere gives NaN. Empty: +inf (integers: the type's largest value).
struct min_reducer {
  static constexpr std::string_view name = "amin";
  template <class V>
  static V identity() {
    using S = scalar_of_t<V>;
    if constexpr (std::is_floating_point_v<S>) return V(std::numeric_limits<S>::infinity());
    else return V(std::numeric_limits<S>::max());
  }
  template <class V>
  static V combine(const V& a, const V& b) { return min_op::apply(a, b); }
  static constexpr std::string_view glsl_identity = "uintBitsToFloat(0x7f800000u)";
  static constexpr std::string_view glsl_identity_int = "int(0x7fffffffu)";
  static constexpr std::string_view glsl = min_op::glsl;
  static constexpr std::string_view glsl_int = min_op::glsl_int;
};

namespace detail {

/// The structural op descriptor of a reduction by reducer R.
template <class R>
struct reduce_op {
  static constexpr std::string_view name = R::name;
  static constexpr structural_family family = structural_family::reduce;
  using reducer = R;
  template <class In>
  static auto pick() {
    if constexpr (requires { typename R::template result_type<In>; }) {
      return std::type_identity<typename R::template result_type<In>>{};
    } else {
      return std::type_identity<In>{};
    }
  }
  template <class In>
  using result_type = typename decltype(pick<In>())::type;
};

template <class R>
constexpr bool reducer_floating_only() {
  if constexpr (requires { R::floating_only; }) return R::floating_only;
  else return false;
}

template <class R, class X>
auto make_reduction(X&& x, int axis, bool all, bool keepdims) {
  using In = typename node_t<X>::value_type;
  static_assert(!std::is_same_v<In, bool>,
                "kiln: reduce a mask as numbers: kiln::sum(kiln::cast<int32_t>(x > 0.0f), -1)");
  static_assert(!reducer_floating_only<R>() || is_floating_v<In>,
                "kiln: this reduction needs a floating-point dtype; convert with kiln::cast<float>(x)");
  return make_structural(reduce_op<R>{}, std::forward<X>(x), {.axis = axis, .all = all, .keepdims = keepdims});
}

}  // namespace detail

/// Reduces x over `axis` (negative counts from the end) with reducer R; keepdims keeps
/// the axis as extent 1. Example: `y = kiln::reduce<my_reducer>(x, -1);`
template <class R, expression X>
auto reduce(X&& x, int axis, bool keepdims = false) {
  return detail::make_reduction<R>(std::forward<X>(x), axis, false, keepdims);
}

/// Reduces all of x's elements with reducer R into a rank-0 result (keepdims: rank kept,
/// every extent 1).
template <class R, expression X>
auto reduce(X&& x) {
  return detail::make_reduction<R>(std::forward<X>(x), 0, true, false);
}

}  // namespace kiln
