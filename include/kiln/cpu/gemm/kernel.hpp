// kiln/cpu/gemm/kernel.hpp — the register-blocked micro-kernels of the CPU matmul.
//
// micro(): an MR x NR tile of C += (a panel of A, MR rows, k-major) x (a panel of B, NR
// columns, k-major), the accumulators in registers for the whole k loop: per k, NR/L
// vector loads of B, MR broadcasts of A and MR * NR / L FMAs. The tile is sized to the
// ISA's register file (xsimd width L): 6 x 2L on 16-register ISAs (AVX2, SSE, NEON:
// 12 accumulators + 2 B vectors + 1 broadcast), 12 x 2L on AVX-512's 32. B comes packed
// (aligned, NR floats per k) or straight from memory (a row-major B of any float dtype,
// converted in registers: the small-M path streams it unpacked).
// dot(): R rows of A times NB columns of a k-contiguous B (an nn.Linear weight read as
// its transpose), vector lanes along k, summed across lanes at the end: the
// matrix-vector path, which streams B once at memory speed. dot_one(): one row against
// one column, for the matrix-vector product whose vector fits in a corner of the L1;
// dot_one_split() the same for bf16 columns, converted two vectors at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "kiln/core/shape.hpp"
#include "kiln/cpu/simd.hpp"

namespace kiln::detail::cpu_gemm {

/// The register tile of arch A.
template <class A>
struct tile {
  static constexpr bool vector = simd::enabled<A>;
  static constexpr int L = vector ? int(simd::lanes<A>) : 1;
  static constexpr int NV = vector ? 2 : 4;  // vectors across a tile row
  static constexpr int NR = L * NV;
  static constexpr int MR = !vector ? 4 : (simd::is_avx512<A> ? 12 : 6);
};

/// A float vector of arch A (a plain float without SIMD) and its operations.
template <class A>
using fvec = std::conditional_t<simd::enabled<A>, xsimd::batch<float, A>, float>;

template <class A>
inline fvec<A> vzero() noexcept {
  if constexpr (simd::enabled<A>) return fvec<A>(0.0f);
  else return 0.0f;
}
template <class A>
inline fvec<A> vbroadcast(float x) noexcept {
  return fvec<A>(x);
}
template <class A>
inline fvec<A> vload_aligned(const float* p) noexcept {
  if constexpr (simd::enabled<A>) return fvec<A>::load_aligned(p);
  else return *p;
}
/// tile<A>::L consecutive elements of p (any float dtype) as floats.
template <class A, class U>
inline fvec<A> vload(const U* p) noexcept {
  if constexpr (simd::enabled<A>) return simd::load<A>(p);
  else return static_cast<float>(*p);
}
template <class A>
inline void vstore(float* p, const fvec<A>& v) noexcept {
  if constexpr (simd::enabled<A>) v.store_unaligned(p);
  else *p = v;
}
template <class A>
inline fvec<A> vfma(const fvec<A>& a, const fvec<A>& b, const fvec<A>& c) noexcept {
  if constexpr (simd::enabled<A>) return kiln::detail::fmadd(a, b, c);  // one instruction also where xsimd has none (AVX-512)
  else return a * b + c;
}
template <class A>
inline float vsum(const fvec<A>& v) noexcept {
  if constexpr (simd::enabled<A>) return xsimd::hadd(v);
  else return v;
}

/// C[MR x NR] (row stride ldc) = (add ? C : 0) + A_panel x B_panel over kc steps.
/// a: MR floats per k, aks apart (packed: MR; attention reads its transposed score tile
/// in place with the tile's row length). b: NR elements per k, bks apart (packed: NR,
/// aligned; a row-major B read in place: its row stride). The whole tile is written.
template <class A, bool Packed, class U>
inline void micro(index_t kc, const float* __restrict a, const U* __restrict b, index_t bks, float* __restrict c,
                  index_t ldc, bool add, index_t aks = tile<A>::MR) noexcept {
  using T = tile<A>;
  using V = fvec<A>;
  V acc[T::MR][T::NV];
#pragma GCC unroll 16
  for (int i = 0; i < T::MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) acc[i][j] = vzero<A>();
  }
  // the tile of C is read (add) or written after the loop: ask for it now
#pragma GCC unroll 16
  for (int i = 0; i < T::MR; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + T::NR - 1, 1, 3);
  }
#pragma GCC unroll 4
  for (index_t k = 0; k < kc; ++k) {
    if constexpr (Packed) __builtin_prefetch(a + 8 * aks, 0, 3);  // A's panel streams from L2
    V bv[T::NV];
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) {
      if constexpr (Packed) bv[j] = vload_aligned<A>(b + j * T::L);
      else bv[j] = vload<A>(b + j * T::L);
    }
#pragma GCC unroll 16
    for (int i = 0; i < T::MR; ++i) {
      const V av = vbroadcast<A>(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < T::NV; ++j) acc[i][j] = vfma<A>(av, bv[j], acc[i][j]);
    }
    a += aks;
    b += bks;
  }
#pragma GCC unroll 16
  for (int i = 0; i < T::MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) {
      float* p = c + i * ldc + j * T::L;
      vstore<A>(p, add ? acc[i][j] + vload<A>(p) : acc[i][j]);
    }
  }
}

/// micro() for a tile cut by the matrix edge: only its first mr rows and nr columns are
/// written (a full tile goes to a local buffer first).
template <class A, bool Packed, class U>
inline void micro_edge(index_t kc, const float* a, const U* b, index_t bks, float* c, index_t ldc, bool add, int mr,
                       int nr) noexcept {
  using T = tile<A>;
  alignas(64) float t[T::MR * T::NR];
  micro<A, Packed>(kc, a, b, bks, t, T::NR, false);
  for (int i = 0; i < mr; ++i) {
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = add ? c[i * ldc + j] + t[i * T::NR + j] : t[i * T::NR + j];
  }
}

/// out[r * ldo + j] = sum_k a[r * K + k] * b[j * bcs + k] for r < R, j < NB: R rows of
/// A (contiguous floats, K long) against NB k-contiguous columns of B.
template <class A, int R, int NB, class U>
inline void dot(index_t K, const float* __restrict a, const U* __restrict b, index_t bcs, float* out,
                index_t ldo) noexcept {
  using V = fvec<A>;
  constexpr int L = tile<A>::L;
  V acc[R][NB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[r][j] = vzero<A>();
  }
  index_t k = 0;
  for (; k + L <= K; k += L) {
    V av[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) av[r] = vload<A>(a + r * K + k);
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      const V bv = vload<A>(b + j * bcs + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][j] = vfma<A>(av[r], bv, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NB; ++j) {
      float s = vsum<A>(acc[r][j]);
      for (index_t t = k; t < K; ++t) s += a[r * K + t] * static_cast<float>(b[j * bcs + t]);
      out[r * ldo + j] = s;
    }
  }
}

/// sum_k a[k] * b[k] over K: one row of A against one k-contiguous column of B, four
/// vectors per step into four accumulators (the FMA latency hidden without other columns).
/// The matrix-vector path calls it column after column, so that B, whose columns lie one
/// after the other, is read as one sequential stream.
template <class A, class U>
inline float dot_one(index_t K, const float* __restrict a, const U* __restrict b) noexcept {
  using V = fvec<A>;
  constexpr int L = tile<A>::L;
  V acc[4] = {vzero<A>(), vzero<A>(), vzero<A>(), vzero<A>()};
  index_t k = 0;
  for (; k + 4 * L <= K; k += 4 * L) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[j] = vfma<A>(vload<A>(a + k + j * L), vload<A>(b + k + j * L), acc[j]);
  }
  for (; k + L <= K; k += L) acc[0] = vfma<A>(vload<A>(a + k), vload<A>(b + k), acc[0]);
  float s = vsum<A>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  for (; k < K; ++k) s += a[k] * static_cast<float>(b[k]);
  return s;
}

/// Whether dot_one_split() serves weights of dtype U on arch A: bf16 on AVX-512 and AVX2.
template <class A, class U>
inline constexpr bool has_dot_split = std::is_same_v<U, bfloat16> && (simd::is_avx512<A> || simd::is_avx2<A>);

/// a (K floats) arranged for dot_one_split() into dst: per whole block of 2L elements,
/// the L at even offsets, then the L at odd ones (the tail past the last block is not
/// written: dot_one_split() reads it from a).
template <class A>
inline void split_even_odd(index_t K, const float* __restrict a, float* __restrict dst) noexcept {
  constexpr int L = tile<A>::L;
  for (index_t k0 = 0; k0 + 2 * L <= K; k0 += 2 * L) {
    for (int i = 0; i < L; ++i) {
      dst[k0 + i] = a[k0 + 2 * i];
      dst[k0 + L + i] = a[k0 + 2 * i + 1];
    }
  }
}

/// dot_one() for bf16 b: one load of 2L weights (one vector's bytes), the even ones made
/// floats by a shift, the odd ones by a mask (where load() widens L at a time first),
/// against as = a arranged by split_even_odd() (a itself for the tail). Four accumulators,
/// two per block pair. Against dot_one() at the BitNet LM head ([128256, 2560], K past a
/// quarter of the L1, where dot_rows took 12 columns side by side), 2 threads of a loaded
/// Zen 4: 20-25% less time a product; fewer instructions per byte, which is what a
/// core shared with other work runs short of.
template <class A, class U>
inline float dot_one_split(index_t K, const float* __restrict as, const float* __restrict a, const U* __restrict b) noexcept {
  static_assert(has_dot_split<A, U>);
  using V = fvec<A>;
  constexpr int L = tile<A>::L;
  V acc[4] = {vzero<A>(), vzero<A>(), vzero<A>(), vzero<A>()};
  const auto block = [&](index_t k0, V& even, V& odd) {
    if constexpr (simd::is_avx512<A>) {
      const __m512i v = _mm512_loadu_si512(b + k0);
      even = vfma<A>(V(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16))), V::load_unaligned(as + k0), even);
      odd = vfma<A>(V(_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xFFFF0000u))))),
                    V::load_unaligned(as + k0 + L), odd);
    } else {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k0));
      even = vfma<A>(V(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16))), V::load_unaligned(as + k0), even);
      odd = vfma<A>(V(_mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xFFFF0000u))))),
                    V::load_unaligned(as + k0 + L), odd);
    }
  };
  index_t k = 0;
  for (; k + 4 * L <= K; k += 4 * L) {
    block(k, acc[0], acc[1]);
    block(k + 2 * L, acc[2], acc[3]);
  }
  for (; k + 2 * L <= K; k += 2 * L) block(k, acc[0], acc[1]);
  float s = vsum<A>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  for (; k < K; ++k) s += a[k] * static_cast<float>(b[k]);
  return s;
}

}  // namespace kiln::detail::cpu_gemm
