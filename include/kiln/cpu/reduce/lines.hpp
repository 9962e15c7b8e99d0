// kiln/cpu/reduce/lines.hpp — vector loops over a buffer that the reduction and row
// kernels share: combine a run with a reducer, sums, exp of a run. Four independent
// accumulators hide the add latency; the scalar tail finishes what no full batch covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kiln/core/shape.hpp"
#include "kiln/cpu/simd.hpp"
#include "kiln/ops/elementwise/exp.hpp"

namespace kiln::detail::cpu_lines {

/// R's combine over x[0, n), starting from acc.
template <class A, class R, class C>
C combine_run(const C* x, index_t n, C acc) {
  index_t i = 0;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<C, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    if (n >= W) {
      V a0 = R::template identity<V>(), a1 = a0, a2 = a0, a3 = a0;
      for (; i + 4 * W <= n; i += 4 * W) {
        a0 = R::combine(a0, V::load_unaligned(x + i));
        a1 = R::combine(a1, V::load_unaligned(x + i + W));
        a2 = R::combine(a2, V::load_unaligned(x + i + 2 * W));
        a3 = R::combine(a3, V::load_unaligned(x + i + 3 * W));
      }
      for (; i + W <= n; i += W) a0 = R::combine(a0, V::load_unaligned(x + i));
      a0 = R::combine(R::combine(a0, a1), R::combine(a2, a3));
      alignas(64) C lanes[W];
      a0.store_aligned(lanes);
      for (index_t k = 0; k < W; ++k) acc = R::combine(acc, lanes[k]);
    }
  }
  for (; i < n; ++i) acc = R::combine(acc, x[i]);
  return acc;
}

/// sum over x[0, n) of f(x[i]) (f: batch or scalar -> same), four accumulators.
template <class A, class F>
float sum_of(const float* x, index_t n, F&& f) {
  index_t i = 0;
  float acc = 0.0f;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    V a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 += f(V::load_unaligned(x + i));
      a1 += f(V::load_unaligned(x + i + W));
      a2 += f(V::load_unaligned(x + i + 2 * W));
      a3 += f(V::load_unaligned(x + i + 3 * W));
    }
    for (; i + W <= n; i += W) a0 += f(V::load_unaligned(x + i));
    acc = xsimd::hadd((a0 + a1) + (a2 + a3));
  }
  for (; i < n; ++i) acc += f(x[i]);
  return acc;
}

/// x[i] = f(x[i]) over [0, n), returning the sum of the new values.
template <class A, class F>
float map_sum(float* x, index_t n, F&& f) {
  index_t i = 0;
  float acc = 0.0f;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    V a0(0.0f), a1(0.0f);
    for (; i + 2 * W <= n; i += 2 * W) {
      const V y0 = f(V::load_unaligned(x + i)), y1 = f(V::load_unaligned(x + i + W));
      y0.store_unaligned(x + i);
      y1.store_unaligned(x + i + W);
      a0 += y0;
      a1 += y1;
    }
    for (; i + W <= n; i += W) {
      const V y = f(V::load_unaligned(x + i));
      y.store_unaligned(x + i);
      a0 += y;
    }
    acc = xsimd::hadd(a0 + a1);
  }
  for (; i < n; ++i) acc += (x[i] = f(x[i]));
  return acc;
}

/// x[i] = f(x[i], i) over [0, n) (i: the position, for per-column parameters).
template <class A, class F>
void map(float* x, index_t n, F&& f) {
  index_t i = 0;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    for (; i + W <= n; i += W) f(V::load_unaligned(x + i), i).store_unaligned(x + i);
  }
  for (; i < n; ++i) x[i] = f(x[i], i);
}

/// p[i] as V: a batch load, or the scalar.
template <class V>
V load_as(const float* p, index_t i) {
  if constexpr (std::is_same_v<V, float>) return p[i];
  else return V::load_unaligned(p + i);
}

}  // namespace kiln::detail::cpu_lines
