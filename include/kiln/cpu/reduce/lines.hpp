// kiln/cpu/reduce/lines.hpp — vector loops over a buffer that the reduction and row
// kernels share: combine a run with a reducer, sums, exp of a run. Four independent
// accumulators hide the add latency; the scalar tail finishes what no full batch covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kiln/core/shape.hpp"
#include "kiln/cpu/simd.hpp"
#include "kiln/expr/lanes.hpp"
#include "kiln/ops/elementwise/exp.hpp"
#include "kiln/ops/reduce/reducer.hpp"

namespace kiln::detail::cpu_lines {

/// max / min of x[0, n) and acc, NaN-propagating: the plain vector max (one instruction;
/// on x86 it drops a NaN in one operand) with NaNs tracked apart, instead of the
/// elementwise max_op's selects in every step.
template <class A, bool Max, class C>
C extreme_run(const C* x, index_t n, C acc) {
  index_t i = 0;
  bool nan = std::is_floating_point_v<C> && acc != acc;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<C, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    if (n >= 4 * W) {
      auto pick = [](const V& a, const V& b) { return Max ? xsimd::max(a, b) : xsimd::min(a, b); };
      V a0 = V::load_unaligned(x), a1 = V::load_unaligned(x + W), a2 = V::load_unaligned(x + 2 * W),
        a3 = V::load_unaligned(x + 3 * W);
      // kiln::is_nan, not a != a: xsimd's batch != is the ordered compare on x86 (false for NaN)
      auto bad = (is_nan(a0) || is_nan(a1)) || (is_nan(a2) || is_nan(a3));
      for (i = 4 * W; i + 4 * W <= n; i += 4 * W) {
        const V v0 = V::load_unaligned(x + i), v1 = V::load_unaligned(x + i + W), v2 = V::load_unaligned(x + i + 2 * W),
                v3 = V::load_unaligned(x + i + 3 * W);
        a0 = pick(a0, v0);
        a1 = pick(a1, v1);
        a2 = pick(a2, v2);
        a3 = pick(a3, v3);
        if constexpr (std::is_floating_point_v<C>) bad = bad || ((is_nan(v0) || is_nan(v1)) || (is_nan(v2) || is_nan(v3)));
      }
      a0 = pick(pick(a0, a1), pick(a2, a3));
      if constexpr (std::is_floating_point_v<C>) nan = nan || xsimd::any(bad);
      alignas(64) C lanes[W];
      a0.store_aligned(lanes);
      for (index_t k = 0; k < W; ++k) acc = Max ? (lanes[k] > acc ? lanes[k] : acc) : (lanes[k] < acc ? lanes[k] : acc);
    }
  }
  for (; i < n; ++i) {
    if constexpr (std::is_floating_point_v<C>) nan = nan || x[i] != x[i];
    acc = Max ? (x[i] > acc ? x[i] : acc) : (x[i] < acc ? x[i] : acc);
  }
  if constexpr (std::is_floating_point_v<C>) {
    if (nan) return std::numeric_limits<C>::quiet_NaN();
  }
  return acc;
}

/// The max of x[0, n) (-inf when empty) where a NaN need not show: the plain vector max,
/// four accumulators. A NaN may or may not come out (the softmax passes after it carry a
/// NaN through on their own).
template <class A>
float plain_max(const float* x, index_t n) {
  index_t i = 0;
  float acc = -std::numeric_limits<float>::infinity();
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    if (n >= 4 * W) {
      V a0 = V::load_unaligned(x), a1 = V::load_unaligned(x + W), a2 = V::load_unaligned(x + 2 * W),
        a3 = V::load_unaligned(x + 3 * W);
      for (i = 4 * W; i + 4 * W <= n; i += 4 * W) {
        a0 = xsimd::max(a0, V::load_unaligned(x + i));
        a1 = xsimd::max(a1, V::load_unaligned(x + i + W));
        a2 = xsimd::max(a2, V::load_unaligned(x + i + 2 * W));
        a3 = xsimd::max(a3, V::load_unaligned(x + i + 3 * W));
      }
      for (; i + W <= n; i += W) a0 = xsimd::max(a0, V::load_unaligned(x + i));
      alignas(64) float lanes[W];
      xsimd::max(xsimd::max(a0, a1), xsimd::max(a2, a3)).store_aligned(lanes);
      for (index_t k = 0; k < W; ++k) acc = lanes[k] > acc ? lanes[k] : acc;
    }
  }
  for (; i < n; ++i) acc = x[i] > acc ? x[i] : acc;
  return acc;
}

/// R's combine over x[0, n), starting from acc.
template <class A, class R, class C>
C combine_run(const C* x, index_t n, C acc) {
  if constexpr (std::is_same_v<R, max_reducer> || std::is_same_v<R, min_reducer>) {
    return extreme_run<A, std::is_same_v<R, max_reducer>>(x, n, acc);
  }
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

/// Prefetch hooks for the passes below: pf(i, count) is called once per step of the
/// pass, for elements [i, i + count) of the pass's row. The row kernels request the next
/// row's input that way, a few lines per step, spread over a pass of this one: neither
/// all at once (the requests queue up and stall) nor left to the hardware (the memory
/// idles while a row computes).
struct no_prefetch {
  void operator()(index_t, index_t) const {}
};
/// The lines of elements [i, i + count) of a run at p of `size`-byte elements into L2:
/// those starting in the elements' bytes (64 a line, counted from p), so one request a
/// line even where a pass steps by less than a line.
inline void prefetch_lines(const char* p, index_t size, index_t i, index_t count) {
  for (index_t off = (i * size + 63) & ~index_t(63), e = (i + count) * size; off < e; off += 64) {
    __builtin_prefetch(p + off, 0, 2);
  }
}
/// The lines of p[i, i + count) into L2 (p null: nothing): a plain row in memory.
struct prefetch_floats {
  const float* p = nullptr;
  void operator()(index_t i, index_t count) const {
    if (p) prefetch_lines(reinterpret_cast<const char*>(p), index_t(sizeof(float)), i, count);
  }
};

/// sum over x[0, n) of f(x[i]) (f: batch or scalar -> same), four accumulators; `pf`: a
/// prefetch hook (see no_prefetch).
template <class A, class F, class Pf = no_prefetch>
float sum_of(const float* x, index_t n, F&& f, const Pf& pf = {}) {
  index_t i = 0;
  float acc = 0.0f;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    V a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
    for (; i + 4 * W <= n; i += 4 * W) {
      pf(i, 4 * W);
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

/// The sums over x[0, n) of d = x[i] - s and of d^2, in one pass (layer_norm's
/// statistics): four accumulators for each; `pf`: a prefetch hook (see no_prefetch).
struct shifted_sums_t {
  float d = 0, dd = 0;
};
template <class A, class Pf = no_prefetch>
shifted_sums_t shifted_sums(const float* x, index_t n, float s, const Pf& pf = {}) {
  index_t i = 0;
  shifted_sums_t r;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    const V sv(s);
    V a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f), q0(0.0f), q1(0.0f), q2(0.0f), q3(0.0f);
    for (; i + 4 * W <= n; i += 4 * W) {
      pf(i, 4 * W);
      const V d0 = V::load_unaligned(x + i) - sv, d1 = V::load_unaligned(x + i + W) - sv;
      const V d2 = V::load_unaligned(x + i + 2 * W) - sv, d3 = V::load_unaligned(x + i + 3 * W) - sv;
      a0 += d0;
      a1 += d1;
      a2 += d2;
      a3 += d3;
      q0 = fmadd(d0, d0, q0);
      q1 = fmadd(d1, d1, q1);
      q2 = fmadd(d2, d2, q2);
      q3 = fmadd(d3, d3, q3);
    }
    for (; i + W <= n; i += W) {
      const V d = V::load_unaligned(x + i) - sv;
      a0 += d;
      q0 = fmadd(d, d, q0);
    }
    r.d = xsimd::hadd((a0 + a1) + (a2 + a3));
    r.dd = xsimd::hadd((q0 + q1) + (q2 + q3));
  }
  for (; i < n; ++i) {
    const float d = x[i] - s;
    r.d += d;
    r.dd += d * d;
  }
  return r;
}

/// y[i] = f(x[i]) over [0, n) (y may be x), returning the sum of the new values; `pf`: a
/// prefetch hook (see no_prefetch).
template <class A, class F, class Pf = no_prefetch>
float map_sum(const float* x, float* y, index_t n, F&& f, const Pf& pf = {}) {
  index_t i = 0;
  float acc = 0.0f;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    V a0(0.0f), a1(0.0f);
    for (; i + 2 * W <= n; i += 2 * W) {
      pf(i, 2 * W);
      const V y0 = f(V::load_unaligned(x + i)), y1 = f(V::load_unaligned(x + i + W));
      y0.store_unaligned(y + i);
      y1.store_unaligned(y + i + W);
      a0 += y0;
      a1 += y1;
    }
    for (; i + W <= n; i += W) {
      const V v = f(V::load_unaligned(x + i));
      v.store_unaligned(y + i);
      a0 += v;
    }
    acc = xsimd::hadd(a0 + a1);
  }
  for (; i < n; ++i) acc += (y[i] = f(x[i]));
  return acc;
}

/// y[i] = f(x[i], i) over [0, n) (y may be x; i: the position, for per-column parameters).
/// `stream`: full batches bypass the cache (y must be aligned to A::alignment(); the
/// caller fences): for a kernel's final pass into a large output that nobody reads soon.
template <class A, class F, class Pf = no_prefetch>
void map(const float* x, float* y, index_t n, F&& f, bool stream = false, const Pf& pf = {}) {
  index_t i = 0;
  if constexpr (simd::enabled<A>) {
    using V = xsimd::batch<float, A>;
    constexpr auto W = static_cast<index_t>(V::size);
    if constexpr (simd::can_stream<A, float>) {
      if (stream) {
        for (; i + W <= n; i += W) {
          pf(i, W);
          simd::stream<A>(y + i, f(V::load_unaligned(x + i), i));
        }
      }
    }
    for (; i + W <= n; i += W) {
      pf(i, W);
      f(V::load_unaligned(x + i), i).store_unaligned(y + i);
    }
  }
  // the rest counted from 0 (as `for (; i < n; ++i)`, GCC 12 at -O3 with AVX-512 warns,
  // wrongly, that this loop may run into undefined behaviour once inlined into a pass)
  x += i;
  y += i;
  for (index_t k = 0, rest = n - i; k < rest; ++k) y[k] = f(x[k], i + k);
}

/// Whether a final pass may stream to y (see map): streaming wanted and y aligned.
template <class A>
bool can_stream_to(bool stream, const float* y) {
  if constexpr (simd::enabled<A> && simd::can_stream<A, float>) {
    return stream && reinterpret_cast<std::uintptr_t>(y) % A::alignment() == 0;
  } else {
    return false;
  }
}

/// p[i] as V: a batch load, or the scalar.
template <class V>
V load_as(const float* p, index_t i) {
  if constexpr (std::is_same_v<V, float>) return p[i];
  else return V::load_unaligned(p + i);
}

}  // namespace kiln::detail::cpu_lines
