// kiln/cpu/gemm/kernel.hpp — the register-blocked micro-kernels of the CPU matmul.
//
// micro(): an MR x NR tile of C += (a panel of A, MR rows, k-major) x (a panel of B, NR
// columns, k-major), the accumulators in registers for the whole k loop: per k, NR/L
// vector loads of B, MR broadcasts of A and MR * NR / L FMAs. The tile is sized to the
// ISA's register file (xsimd width L): 6 x 2L on 16-register ISAs (AVX2, SSE, NEON:
// 12 accumulators + 2 B vectors + 1 broadcast), 12 x 2L on AVX-512's 32. B comes packed
// (aligned, NR floats per k) or straight from memory (a row-major B of any float dtype,
// converted in registers: the small-M path streams it unpacked).
// micro_t(): the roles turned, for x @ w^T with few rows of x: rows of an f32 weight read
// in place as A, rows of x packed as B, the tile written to C transposed (y^T = w x^T):
// the weight is never packed. Its tile (tile_t) keeps the weight's rows within an L1 set.
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
/// Fetches the line of p into the L2 (prefetcht1 on x86).
inline void prefetch_l2(const void* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 2);
#else
  (void)p;
#endif
}

/// Keeps v in a register: where a loaded vector feeds several FMAs, GCC otherwise folds
/// its load into each of them (dot()'s 4 x 6 group on f32 weights: 28 512-bit loads for
/// 24 FMAs, half the FMA rate of a Zen 4 core from its L2).
template <class A>
inline void vpin(fvec<A>& v) noexcept {
#if defined(__GNUC__)
  if constexpr (simd::enabled<A>) asm("" : "+v"(v.data));
#else
  (void)v;
#endif
}
template <class A>
inline float vsum(const fvec<A>& v) noexcept {
  if constexpr (simd::enabled<A>) return xsimd::hadd(v);
  else return v;
}

/// Transposes the L x L square v (v[i] holds elements (i, 0 .. L)) in registers and hands
/// each of its columns, (0 .. L, j), to put(j, vector): AVX-512 16 x 16, AVX2 8 x 8 with
/// shuffles; other ISAs through a buffer.
template <class A, class Put>
inline void transpose_square(const fvec<A>* v, Put&& put) noexcept {
  constexpr int L = tile<A>::L;
  if constexpr (simd::is_avx512<A>) {
    // pairs of rows interleaved, then quadruples: u[4q + j] holds, in 128-bit lane l,
    // element 4l + j of rows 4q .. 4q + 3
    __m512 u[16];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512 lo0 = _mm512_unpacklo_ps(v[4 * q], v[4 * q + 1]), hi0 = _mm512_unpackhi_ps(v[4 * q], v[4 * q + 1]);
      const __m512 lo1 = _mm512_unpacklo_ps(v[4 * q + 2], v[4 * q + 3]), hi1 = _mm512_unpackhi_ps(v[4 * q + 2], v[4 * q + 3]);
      u[4 * q + 0] = _mm512_shuffle_ps(lo0, lo1, 0x44);
      u[4 * q + 1] = _mm512_shuffle_ps(lo0, lo1, 0xEE);
      u[4 * q + 2] = _mm512_shuffle_ps(hi0, hi1, 0x44);
      u[4 * q + 3] = _mm512_shuffle_ps(hi0, hi1, 0xEE);
    }
    // lanes gathered across the quadruples: column 4l + j is lane l of u[j], u[4 + j], ...
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 p0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), p1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
      const __m512 p2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), p3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
      put(j, _mm512_shuffle_f32x4(p0, p2, 0x88));
      put(4 + j, _mm512_shuffle_f32x4(p1, p3, 0x88));
      put(8 + j, _mm512_shuffle_f32x4(p0, p2, 0xDD));
      put(12 + j, _mm512_shuffle_f32x4(p1, p3, 0xDD));
    }
  } else if constexpr (simd::is_avx2<A>) {
    __m256 u[8];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      const __m256 lo0 = _mm256_unpacklo_ps(v[4 * q], v[4 * q + 1]), hi0 = _mm256_unpackhi_ps(v[4 * q], v[4 * q + 1]);
      const __m256 lo1 = _mm256_unpacklo_ps(v[4 * q + 2], v[4 * q + 3]), hi1 = _mm256_unpackhi_ps(v[4 * q + 2], v[4 * q + 3]);
      u[4 * q + 0] = _mm256_shuffle_ps(lo0, lo1, 0x44);
      u[4 * q + 1] = _mm256_shuffle_ps(lo0, lo1, 0xEE);
      u[4 * q + 2] = _mm256_shuffle_ps(hi0, hi1, 0x44);
      u[4 * q + 3] = _mm256_shuffle_ps(hi0, hi1, 0xEE);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      put(j, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
      put(4 + j, _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
    }
  } else {
    alignas(64) float in[L * L], col[L];
    for (int i = 0; i < L; ++i) vstore<A>(in + i * L, v[i]);
    for (int j = 0; j < L; ++j) {
      for (int i = 0; i < L; ++i) col[i] = in[i * L + j];
      put(j, vload_aligned<A>(col));
    }
  }
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

/// The register tile of micro_t() on arch A: MR rows of the weight (each broadcast per
/// k), NR = NV vectors of x's rows. The weight's rows lie K floats apart, a multiple of
/// 4 KiB for the usual K, so that the lines of all MR rows fall into one L1 set: 12 of
/// them in the 8 ways of a Zen 4 L1 missed at every k (12 x 32 ran at 78% of the FMA loop
/// at K = 2048 and 86% at K = 2064, one thread). AVX-512 takes 6 rows x 4 vectors (24
/// accumulators, as many as 12 x 2), the other ISAs their tile<A> (6 rows or fewer).
template <class A>
struct tile_t {
  static constexpr int L = tile<A>::L;
  static constexpr int NV = simd::is_avx512<A> ? 4 : tile<A>::NV;
  static constexpr int NR = L * NV;
  static constexpr int MR = simd::is_avx512<A> ? 6 : tile<A>::MR;
};

/// The transposed tile: C^T[MR x NR] = (add ? C^T : 0) + W_rows x B_panel over kc steps,
/// for y = x w^T computed as y^T = w x^T. w: MR rows of an f32 weight read in place, k
/// contiguous, lda apart (rows past mr repeat row mr - 1, so that nothing past the edge
/// is read); b: an NR-wide panel of x's rows (packed, aligned, NR floats per k). Lane l
/// of the accumulators of w's row i is output (j * L + l, i): the tile goes to C
/// transposed, L x L squares in registers (AVX-512, AVX2), written for its first nr rows
/// (x's rows) and mr columns (w's rows) only. MR and NR: tile_t<A>.
template <class A>
inline void micro_t(index_t kc, const float* __restrict w, index_t lda, const float* __restrict b, float* __restrict c,
                    index_t ldc, bool add, int mr, int nr) noexcept {
  using T = tile_t<A>;
  using V = fvec<A>;
  constexpr int L = T::L;
  const float* wr[T::MR];
#pragma GCC unroll 16
  for (int i = 0; i < T::MR; ++i) wr[i] = w + (i < mr ? i : mr - 1) * lda;
  V acc[T::MR][T::NV];
#pragma GCC unroll 16
  for (int i = 0; i < T::MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) acc[i][j] = vzero<A>();
  }
#pragma GCC unroll 4
  for (index_t k = 0; k < kc; ++k) {
    V bv[T::NV];
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) bv[j] = vload_aligned<A>(b + j * L);
#pragma GCC unroll 16
    for (int i = 0; i < T::MR; ++i) {
      const V av = vbroadcast<A>(wr[i][k]);
#pragma GCC unroll 4
      for (int j = 0; j < T::NV; ++j) acc[i][j] = vfma<A>(av, bv[j], acc[i][j]);
    }
    b += T::NR;
  }
  if constexpr ((simd::is_avx512<A> || simd::is_avx2<A>) && T::MR <= L) {
#pragma GCC unroll 4
    for (int j = 0; j < T::NV; ++j) {
      V v[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) v[i] = i < T::MR ? acc[i][j] : vzero<A>();
      transpose_square<A>(v, [&](int l, const auto& x) {
        if (j * L + l >= nr) return;
        float* p = c + (j * L + l) * ldc;
        if constexpr (simd::is_avx512<A>) {
          const __mmask16 keep = __mmask16((1u << mr) - 1);
          __m512 y = x;
          if (add) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(keep, p));
          _mm512_mask_storeu_ps(p, keep, y);
        } else {
          alignas(32) float t[L];
          _mm256_store_ps(t, x);
          for (int i = 0; i < mr; ++i) p[i] = add ? p[i] + t[i] : t[i];
        }
      });
    }
  } else {
    alignas(64) float t[T::MR * T::NR];
    for (int i = 0; i < T::MR; ++i) {
      for (int j = 0; j < T::NV; ++j) vstore<A>(t + i * T::NR + j * L, acc[i][j]);
    }
    for (int s = 0; s < nr; ++s) {
      for (int i = 0; i < mr; ++i) c[s * ldc + i] = add ? c[s * ldc + i] + t[i * T::NR + s] : t[i * T::NR + s];
    }
  }
}

#if defined(__AVX512F__)
/// Lane i: the sum of v[i]'s 16 lanes. Four levels of pairs: at each, two vectors' lanes
/// are added in adjacent pairs (even and odd lanes gathered by two vpermt2ps), so that a
/// level halves the vectors and the lanes each source keeps, in order: 15 x (2
/// permutations + 1 addition) for 16 sums, where a horizontal sum each takes 8.
inline __m512 sum16(__m512 (&v)[16]) noexcept {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#pragma GCC unroll 4
  for (int n = 16; n > 1; n /= 2) {
#pragma GCC unroll 8
    for (int i = 0; i < n / 2; ++i) {
      v[i] = _mm512_add_ps(_mm512_permutex2var_ps(v[2 * i], even, v[2 * i + 1]), _mm512_permutex2var_ps(v[2 * i], odd, v[2 * i + 1]));
    }
  }
  return v[0];
}
#endif

/// One vector of k (at k) of dot() and dot_block(): R rows of a (lda apart) times NB
/// columns of b (ldb apart) into the R x NB lane accumulators.
template <class A, int R, int NB, class U>
inline void dot_step(fvec<A> (&acc)[R][NB], const float* __restrict a, index_t lda, const U* __restrict b, index_t ldb,
                     index_t k) noexcept {
  using V = fvec<A>;
  constexpr int regs = simd::is_avx512<A> ? 32 : 16;
  if constexpr (R > 1 && NB > 1 && R * NB + R + 1 > regs && R * NB + NB + 1 <= regs) {
    // the columns held and the rows loaded one at a time, where holding the rows would
    // spill (AVX2 4 x 3: 12 accumulators, 3 columns and a row in the 16 registers)
    V bv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      bv[j] = vload<A>(b + j * ldb + k);
      vpin<A>(bv[j]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V av = vload<A>(a + r * lda + k);
      vpin<A>(av);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[r][j] = vfma<A>(av, bv[j], acc[r][j]);
    }
  } else {
    V av[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      av[r] = vload<A>(a + r * lda + k);
      if constexpr (NB > 1) vpin<A>(av[r]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      V bv = vload<A>(b + j * ldb + k);
      if constexpr (R > 1) vpin<A>(bv);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][j] = vfma<A>(av[r], bv, acc[r][j]);
    }
  }
}

/// out[r * ldo + j] = sum_k a[r * K + k] * b[j * bcs + k] for r < R, j < NB: R rows of
/// A (contiguous floats, K long) against NB k-contiguous columns of B. With next, the
/// NB columns from next (same strides: the caller's next ones) are fetched into the L2
/// line by line along the way: columns of a few KiB, each its own page, are too short for
/// the hardware prefetcher to reach speed on (f16 [5632, 2048] at 8 rows, one Zen 4 core:
/// 76 -> 87 GFLOP/s with the next 6 columns fetched).
template <class A, int R, int NB, class U>
inline void dot(index_t K, const float* __restrict a, const U* __restrict b, index_t bcs, float* out,
                index_t ldo, const U* next = nullptr) noexcept {
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
    if (next && (k * index_t(sizeof(U))) % 64 == 0) {  // a line a column per 64 bytes of k
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) prefetch_l2(next + j * bcs + k);
    }
    dot_step<A, R, NB>(acc, a, K, b, bcs, k);
  }
  // the R x NB lane sums: on AVX-512 sixteen at a time (sum16), not one horizontal sum
  // each (one Zen 4 core, 8 rows against f16 [90, 2048] from the L2 in 4 x 6 groups: 1-8%
  // faster, median 3%); every R and NB alike, so that a column's sum does not depend on
  // the group it ran in
  alignas(64) float sums[(R * NB + 15) / 16 * 16];
#if defined(__AVX512F__)
  if constexpr (simd::is_avx512<A>) {
    for (int c = 0; c < R * NB; c += 16) {
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) v[i] = c + i < R * NB ? __m512(acc[(c + i) / NB][(c + i) % NB]) : _mm512_setzero_ps();
      _mm512_store_ps(sums + c, sum16(v));
    }
  } else
#endif
  {
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < NB; ++j) sums[r * NB + j] = vsum<A>(acc[r][j]);
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NB; ++j) {
      float s = sums[r * NB + j];
      for (index_t t = k; t < K; ++t) s += a[r * K + t] * static_cast<float>(b[j * bcs + t]);
      out[r * ldo + j] = s;
    }
  }
}

/// The R x NB lane accumulators of dot_block() and dot_block_converting() from acc_mem
/// (aligned, R * NB vectors), or zero when first; and back.
template <class A, int R, int NB>
inline void block_acc_load(fvec<A> (&acc)[R][NB], const float* acc_mem, bool first) noexcept {
  constexpr int L = tile<A>::L;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[r][j] = first ? vzero<A>() : vload_aligned<A>(acc_mem + (r * NB + j) * L);
  }
}
template <class A, int R, int NB>
inline void block_acc_store(const fvec<A> (&acc)[R][NB], float* acc_mem) noexcept {
  constexpr int L = tile<A>::L;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) vstore<A>(acc_mem + (r * NB + j) * L, acc[r][j]);
  }
}

/// dot() cut along k, for columns converted to f32 a block of k at a time (dot_blocked in
/// driver.hpp): acc holds the R x NB lane accumulators between blocks (R * NB vectors,
/// aligned), zeroed when first. kc: a multiple of tile<A>::L. a: R rows lda apart, b: NB
/// columns ldb apart, both f32 and starting at the block's first k. The lanes add in
/// dot()'s order, so that dot_finish() gives dot()'s sums bit for bit.
template <class A, int R, int NB>
inline void dot_block(index_t kc, const float* __restrict a, index_t lda, const float* __restrict b, index_t ldb,
                      float* __restrict acc_mem, bool first) noexcept {
  using V = fvec<A>;
  constexpr int L = tile<A>::L;
  V acc[R][NB];
  block_acc_load<A>(acc, acc_mem, first);
  for (index_t k = 0; k < kc; k += L) dot_step<A, R, NB>(acc, a, lda, b, ldb, k);
  block_acc_store<A>(acc, acc_mem);
}

/// dot_block() against NB 16-bit columns converted as it goes (dot_shared in driver.hpp):
/// each converted vector also goes to cvt (NB columns ldc apart, from the block's first k),
/// where the other groups of rows read the block with dot_block(), so that a vector is
/// converted once for all the rows, not once per group. b: the NB columns (ldb apart) from
/// the block's first k; next (or null): the next columns at the same k, fetched into the
/// L2 a line a column per 64 bytes of k, as dot() does. The lanes add in dot()'s order.
template <class A, int R, int NB, class U>
[[gnu::noinline]] void dot_block_converting(index_t kc, const float* __restrict a, index_t lda, const U* __restrict b,
                                 index_t ldb, float* __restrict cvt, index_t ldc, float* __restrict acc_mem, bool first,
                                 const U* next) noexcept {
  using V = fvec<A>;
  constexpr int L = tile<A>::L;
  V acc[R][NB];
  block_acc_load<A>(acc, acc_mem, first);
  for (index_t k = 0; k < kc; k += L) {
    if (next && (k * index_t(sizeof(U))) % 64 == 0) {
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) prefetch_l2(next + j * ldb + k);
    }
    V bv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      bv[j] = vload<A>(b + j * ldb + k);
      vpin<A>(bv[j]);
      vstore<A>(cvt + j * ldc + k, bv[j]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V av = vload<A>(a + r * lda + k);
      vpin<A>(av);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[r][j] = vfma<A>(av, bv[j], acc[r][j]);
    }
  }
  block_acc_store<A>(acc, acc_mem);
}

/// The end of a dot() cut by dot_block(): out[r * ldo + j] = the lane sum of accumulator
/// (r, j) plus the products past kfull (the last whole vector of k), from a (R rows, K
/// long, lda apart) and the original columns b (bcs apart), in dot()'s order (bit for bit
/// below AVX-512, where dot() also sums each accumulator with vsum()).
template <class A, int R, int NB, class U>
inline void dot_finish(index_t K, index_t kfull, const float* acc_mem, const float* __restrict a, index_t lda,
                       const U* __restrict b, index_t bcs, float* out, index_t ldo) noexcept {
  constexpr int L = tile<A>::L;
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NB; ++j) {
      float s = vsum<A>(vload_aligned<A>(acc_mem + (r * NB + j) * L));
      for (index_t t = kfull; t < K; ++t) s += a[r * lda + t] * static_cast<float>(b[j * bcs + t]);
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
