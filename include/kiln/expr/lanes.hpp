// kiln/expr/lanes.hpp — the vocabulary an op body is written in.
// An op's apply() is a template over V: a scalar (float, int32_t; masks are bool) or a
// SIMD batch of them. These helpers make the few things that differ between the two
// spellings read the same. Backends specialise lane_traits for their vector types.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace kiln {

/// Per-value-type customisation point; backends specialise it for their vector types.
template <class V>
struct lane_traits {
  using scalar_type = V;
  /// A mask M converted to the mask type that goes with V.
  template <class M>
  static bool mask_for(const M& m) {
    if constexpr (std::is_same_v<M, bool>) return m;
    else return m != M(0);  // an integer used as a mask (e.g. a u8 tensor): non-zero is true
  }
  /// f applied to each lane (scalars: once). For ops with no vector spelling.
  template <class F, class... Vs>
  static V per_lane(F&& f, const V& a, const Vs&... b) {
    return f(a, b...);
  }
};

/// Element type of V: V itself for scalars, the lane type for a batch.
template <class V>
using scalar_of_t = typename lane_traits<V>::scalar_type;

/// Converts any mask (or integer treated as one) into the mask type that selects V.
template <class V, class M>
auto mask_for(const M& m) {
  return lane_traits<V>::mask_for(m);
}

/// a where m is true, else b, lane by lane. m may be any mask (a comparison of another
/// dtype, or an integer value: non-zero is true). Callable qualified or unqualified.
template <class M, class V>
V select(const M& m, const V& a, const V& b) {
  if constexpr (std::is_arithmetic_v<V>) return mask_for<V>(m) ? a : b;
  else return lane_traits<V>::select(mask_for<V>(m), a, b);
}

/// f(a, b...) lane by lane: the escape hatch for ops without a vector spelling.
template <class F, class V, class... Vs>
V per_lane(F&& f, const V& a, const Vs&... b) {
  return lane_traits<V>::per_lane(std::forward<F>(f), a, b...);
}

/// NaN test that also accepts integer values (always false for them).
template <class V>
auto is_nan(const V& v) {
  if constexpr (std::is_floating_point_v<scalar_of_t<V>>) {
    using std::isnan;
    return isnan(v);
  } else {
    return v != v;
  }
}

namespace detail {

/// min(hi, x) that keeps a NaN x (NaN in, NaN out): one instruction. Scalars compare;
/// batches rely on the vector min returning its second operand when either is NaN (SSE,
/// AVX, AVX-512), or NaN itself (NEON, WebAssembly).
template <class V>
V min_keep_nan(const V& hi, const V& x) {
  if constexpr (std::is_arithmetic_v<V>) {
    return hi < x ? hi : x;
  } else {
    return min(hi, x);
  }
}

/// max(lo, x) that keeps a NaN x, as min_keep_nan.
template <class V>
V max_keep_nan(const V& lo, const V& x) {
  if constexpr (std::is_arithmetic_v<V>) {
    return x < lo ? lo : x;
  } else {
    return max(lo, x);
  }
}

/// x * 2^n, rounded once, for a float x in [0.5, 2) and an integral-valued float n in
/// [-150, 128] (the range exp's reduction gives): results overflow to inf and underflow
/// through the subnormals to 0 as IEEE multiplication would. NaN n gives NaN. Backends
/// give their vector types a lane_traits::scale_by_pow2 (one instruction on AVX-512).
template <class V>
V scale_by_pow2(const V& x, const V& n) {
  if constexpr (std::is_arithmetic_v<V>) {
    return n == n ? std::ldexp(x, static_cast<int>(n)) : n;
  } else {
    return lane_traits<V>::scale_by_pow2(x, n);
  }
}

/// a / b within about an ulp (not always rounded correctly), for a finite, normal,
/// non-zero b: where the vector type's lane_traits has a divide_approx (AVX-512: a 14-bit
/// reciprocal estimate and one Newton step, which keep the multiply-add units busy where
/// a division would hold them for several cycles), that; elsewhere a / b.
template <class V>
V divide_approx(const V& a, const V& b) {
  if constexpr (requires { lane_traits<V>::divide_approx(a, b); }) return lane_traits<V>::divide_approx(a, b);
  else return a / b;
}

/// a * b + c rounded once, for scalars and batches alike. Op bodies call this rather
/// than an unqualified fma: a library's vector fma may be a multiply and an add where the
/// target has no instruction of its own for it (xsimd 8 on AVX-512), and then whether the
/// compiler contracts them depends on the optimisation level and the surrounding code
/// (fma(c, c, -c * c), the error of a square, came out 0 at -O1).
template <class V>
V fmadd(const V& a, const V& b, const V& c) {
  if constexpr (std::is_arithmetic_v<V>) return std::fma(a, b, c);
  else return lane_traits<V>::fma(a, b, c);
}

/// c^2 - h exactly, for h = c * c rounded (|c| well inside the float range): one fused
/// multiply-add where the lanes have one; where they do not (lane_traits' fused_fma is
/// false: SSE2, AVX without FMA3), Veltkamp's split of c into two 12-bit halves, whose
/// products are exact.
template <class V>
V square_error(const V& c, const V& h) {
  if constexpr (std::is_arithmetic_v<V>) {
    return fmadd(c, c, -h);
  } else if constexpr (lane_traits<V>::fused_fma) {
    return fmadd(c, c, -h);
  } else {
    using S = scalar_of_t<V>;
    const V p = c * V(std::is_same_v<S, double> ? S(134217729.0) : S(4097.0));  // 2^(digits/2) + 1
    const V ch = p - (p - c);
    const V cl = c - ch;
    return ((ch * ch - h) + V(S(2)) * ch * cl) + cl * cl;
  }
}

/// c[0] + c[1] t + c[2] t^2 + ... by Horner's rule (one fused multiply-add a term).
template <class V, class C, std::size_t N>
V horner(const V& t, const std::array<C, N>& c) {
  V r = V(c[N - 1]);
  for (std::size_t k = N - 1; k-- > 0;) r = fmadd(r, t, V(c[k]));
  return r;
}

}  // namespace detail
}  // namespace kiln
