// kiln/cpu/quant/matvec.hpp — the decode kernel of the CPU quantized matmul (one row of
// activations, one scale per weight row): 512-bit vpdpbusd over pairs of 32-byte chunks,
// one accumulator per plane, the planes masked in place instead of shifted down.
//
// dot.hpp's 1 x 4 tile unpacks each plane of a chunk with a shift and a mask into one
// accumulator per weight row: at the BitNet 2B-4T shape (rows of 640 bytes) each row's
// sum was a chain of four dependent vpdpbusd per chunk, with two unpacking operations
// per vpdpbusd beside it. Here a 64-byte load holds two chunks of a row; plane p is
// the load masked with the plane's bits in place (code << bits * p: one vpandd, no shift;
// int8 takes the load as is) and has its own accumulator, whose sum is 2^(bits p) times
// the plane's: an exact arithmetic shift takes the factor back at the end. A tile of
// C = 4 weight rows then keeps 4 P independent chains, the activations of a chunk pair
// loaded once for the 4 rows, one vpandd and one vpdpbusd per 64 codes of a plane.
// The activations are arranged once per product to match (arrange()): for chunk pair j,
// plane p, the 64 bytes are plane p of chunk 2j then of chunk 2j + 1. The ternary loop
// is asm (ternary_sums: GCC spilled accumulators otherwise). One Zen 4 core, weight rows
// of K = 2560 from the L2, against dot.hpp's 1 x 4 tile: ternary 41 GB/s of codes (was
// 26), int8 74 (was 33); from memory each tile fetches in software the rows of the tile
// two ahead (without: about half the rate at 2 threads; one tile ahead, the BitNet 2B-4T
// projections at 2 threads of a Zen 4 took 7-25% more time, 40-90% more under load from
// other processes; three tiles about the same as two, four and six more).
// The stored codes' offset is taken back once per segment (offset * sum(x), dot.hpp's
// segment_offsets), and a segment's int32 sum is exact, so the result equals dot.hpp's
// bit for bit wherever that one's float lane sums are exact (|sums| < 2^24).
// Built where the compiler targets AVX-512 VNNI with AVX-512BW (as panel.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kiln/core/shape.hpp"
#include "kiln/cpu/quant/dot.hpp"

#if defined(KILN_QUANT_HAS_VNNI) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define KILN_QUANT_HAS_MATVEC512 1

namespace kiln::detail::cpu_quant::matvec {

/// Weight rows per tile.
inline constexpr int C = 4;

/// Tiles ahead of the one running that the software prefetches fetch (see the top).
inline constexpr int ahead_tiles = 2;

/// Bytes of the arranged activations of a row of `chunks` chunks (whole chunk pairs).
template <class Scheme>
constexpr index_t arranged_bytes(index_t chunks) noexcept {
  return (chunks + 1) / 2 * 2 * Scheme::chunk;
}

/// x (chunks * Scheme::chunk int8 activations) arranged for rows(): for chunk pair j and
/// plane p, 64 bytes at dst + (j * P + p) * 64: plane p of chunk 2j (32 bytes), then of
/// chunk 2j + 1 (zeros past the last chunk).
template <class Scheme>
void arrange(const std::int8_t* x, index_t chunks, std::int8_t* dst) noexcept {
  constexpr int P = planes<Scheme>;
  const index_t pairs = (chunks + 1) / 2;
  for (index_t j = 0; j < pairs; ++j) {
    for (int p = 0; p < P; ++p) {
      for (int h = 0; h < 2; ++h) {
        std::int8_t* d = dst + (j * P + p) * 64 + h * 32;
        const index_t c = 2 * j + h;
        if (c < chunks) std::memcpy(d, x + c * Scheme::chunk + 32 * p, 32);
        else std::memset(d, 0, 32);
      }
    }
  }
}

/// acc + sum by fours of u (unsigned bytes) * x (signed bytes); the accumulator tied in
/// asm where the compiler is GCC-compatible (see panel.hpp's dpbusd).
inline __m512i dpbusd(__m512i acc, __m512i u, __m512i x) noexcept {
#if defined(__GNUC__)
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(x));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, u, x);
#endif
}

/// Keeps v in a register: GCC otherwise folds the load of a weight row's 64 bytes into
/// each plane's vpandd, four 512-bit loads where one does (on Zen 4 a 512-bit load takes
/// about 1.5 cycles of the load units, a vpdpbusd one cycle of its pipes).
inline void in_register(__m512i& v) noexcept {
#if defined(__GNUC__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

/// The four int32 sums of the 16 lanes of t[0..3], as lanes 0..3.
inline __m128i sum4(const __m512i (&t)[C]) noexcept {
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(t[0], t[1]), _mm512_unpackhi_epi32(t[0], t[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(t[2], t[3]), _mm512_unpackhi_epi32(t[2], t[3]));
  // each 128-bit block: t0, t1, t2, t3 (each a sum of four of its lanes)
  const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  const __m256i d = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
}

/// t[c] += the sums of C weight rows w + c * stride (c < C) over chunk pairs [j0, j1) of
/// xs (Whole: 64 bytes a row; else the odd last chunk, 32), plane p's sums 2^(bits p)
/// times its codes' (taken back by exact shifts); with pf, line j * C + c of the C rows
/// after them is fetched at pair j.
template <class Scheme, bool Whole>
inline void sums(const std::uint8_t* w, index_t stride, const std::int8_t* xs, index_t j0, index_t j1, bool pf,
                 __m512i (&t)[C]) noexcept {
  constexpr int P = planes<Scheme>;
  const std::uint8_t* const nx = w + ahead_tiles * C * stride;
  __m512i acc[C][P];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[c][p] = _mm512_setzero_si512();
  for (index_t j = j0; j < j1; ++j) {
    if (pf) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(nx + (j * C + c) * 64), _MM_HINT_T0);
    }
    __m512i xv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) xv[p] = _mm512_loadu_si512(xs + (j * P + p) * 64);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const std::uint8_t* const src = w + c * stride + j * 64;
      __m512i v = Whole ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8(__mmask64(0xFFFFFFFFull), src);
      in_register(v);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m512i u = P == 1 ? v : _mm512_and_si512(v, _mm512_set1_epi8(char(((1 << Scheme::bits) - 1) << (Scheme::bits * p))));
        acc[c][p] = dpbusd(acc[c][p], u, xv[p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    t[c] = _mm512_add_epi32(t[c], acc[c][0]);
#pragma GCC unroll 4
    for (int p = 1; p < P; ++p) t[c] = _mm512_add_epi32(t[c], _mm512_srai_epi32(acc[c][p], Scheme::bits * p));
  }
}

#if defined(__GNUC__)
/// sums<ternary, true> as one asm loop: GCC kept some of the 16 accumulators (and the
/// masks and activations) of the C++ loop in memory, loading and storing them each pair
/// (38 GB/s from L2 on a Zen 4 core; about 55 this way, the loop's 16 vpdpbusd a pair at
/// one a cycle). Accumulators zmm0-15 (row r, plane p: zmm(4r + p)), activations
/// zmm28-31, the row's 64 bytes zmm26, a masked plane zmm27; masks from the caller.
inline void ternary_sums(const std::uint8_t* w, index_t stride, const std::int8_t* xs, index_t j0, index_t j1, bool pf,
                         __m512i (&t)[C]) noexcept {
  const std::uint8_t* w0 = w + j0 * 64;
  const std::uint8_t* w2 = w + 2 * stride + j0 * 64;
  const std::uint8_t* nx = w + ahead_tiles * C * stride + j0 * C * 64;
  const std::int8_t* x = xs + j0 * 4 * 64;
  index_t n = j1 - j0;
  const __m512i m0 = _mm512_set1_epi8(0x03), m1 = _mm512_set1_epi8(0x0C), m2 = _mm512_set1_epi8(0x30),
                m3 = _mm512_set1_epi8(char(0xC0));
  __m512i r0, r1, r2, r3;
#define KILN_MATVEC_ROW(src, a0, a1, a2, a3)    \
  "vmovdqu64 " src ", %%zmm26\n\t"             \
  "vpandd %%zmm26, %[m0], %%zmm27\n\t"         \
  "vpdpbusd %%zmm28, %%zmm27, %%" a0 "\n\t"    \
  "vpandd %%zmm26, %[m1], %%zmm27\n\t"         \
  "vpdpbusd %%zmm29, %%zmm27, %%" a1 "\n\t"    \
  "vpandd %%zmm26, %[m2], %%zmm27\n\t"         \
  "vpdpbusd %%zmm30, %%zmm27, %%" a2 "\n\t"    \
  "vpandd %%zmm26, %[m3], %%zmm26\n\t"         \
  "vpdpbusd %%zmm31, %%zmm26, %%" a3 "\n\t"
#define KILN_MATVEC_SUM(a0, a1, a2, a3, out)    \
  "vpsrad $2, %%" a1 ", %%" a1 "\n\t"           \
  "vpsrad $4, %%" a2 ", %%" a2 "\n\t"           \
  "vpsrad $6, %%" a3 ", %%" a3 "\n\t"           \
  "vpaddd %%" a1 ", %%" a0 ", %%" a0 "\n\t"     \
  "vpaddd %%" a3 ", %%" a2 ", %%" a2 "\n\t"     \
  "vpaddd %%" a2 ", %%" a0 ", %[" out "]\n\t"
  asm("vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovdqa64 %%zmm0, %%zmm1\n\t vmovdqa64 %%zmm0, %%zmm2\n\t vmovdqa64 %%zmm0, %%zmm3\n\t"
      "vmovdqa64 %%zmm0, %%zmm4\n\t vmovdqa64 %%zmm0, %%zmm5\n\t vmovdqa64 %%zmm0, %%zmm6\n\t"
      "vmovdqa64 %%zmm0, %%zmm7\n\t vmovdqa64 %%zmm0, %%zmm8\n\t vmovdqa64 %%zmm0, %%zmm9\n\t"
      "vmovdqa64 %%zmm0, %%zmm10\n\t vmovdqa64 %%zmm0, %%zmm11\n\t vmovdqa64 %%zmm0, %%zmm12\n\t"
      "vmovdqa64 %%zmm0, %%zmm13\n\t vmovdqa64 %%zmm0, %%zmm14\n\t vmovdqa64 %%zmm0, %%zmm15\n\t"
      "1:\n\t"
      "testb %[pf], %[pf]\n\t"
      "jz 2f\n\t"
      "prefetcht0 (%[nx])\n\t prefetcht0 64(%[nx])\n\t prefetcht0 128(%[nx])\n\t prefetcht0 192(%[nx])\n\t"
      "2:\n\t"
      "vmovdqu64 (%[x]), %%zmm28\n\t vmovdqu64 64(%[x]), %%zmm29\n\t"
      "vmovdqu64 128(%[x]), %%zmm30\n\t vmovdqu64 192(%[x]), %%zmm31\n\t"
      KILN_MATVEC_ROW("(%[w0])", "zmm0", "zmm1", "zmm2", "zmm3")
      KILN_MATVEC_ROW("(%[w0],%[s])", "zmm4", "zmm5", "zmm6", "zmm7")
      KILN_MATVEC_ROW("(%[w2])", "zmm8", "zmm9", "zmm10", "zmm11")
      KILN_MATVEC_ROW("(%[w2],%[s])", "zmm12", "zmm13", "zmm14", "zmm15")
      "addq $64, %[w0]\n\t addq $64, %[w2]\n\t addq $256, %[x]\n\t addq $256, %[nx]\n\t"
      "decq %[n]\n\t"
      "jnz 1b\n\t"
      KILN_MATVEC_SUM("zmm0", "zmm1", "zmm2", "zmm3", "r0")
      KILN_MATVEC_SUM("zmm4", "zmm5", "zmm6", "zmm7", "r1")
      KILN_MATVEC_SUM("zmm8", "zmm9", "zmm10", "zmm11", "r2")
      KILN_MATVEC_SUM("zmm12", "zmm13", "zmm14", "zmm15", "r3")
      : [r0] "=v"(r0), [r1] "=v"(r1), [r2] "=v"(r2), [r3] "=v"(r3), [w0] "+r"(w0), [w2] "+r"(w2), [x] "+r"(x),
        [nx] "+r"(nx), [n] "+r"(n)
      : [s] "r"(stride), [pf] "q"(pf), [m0] "v"(m0), [m1] "v"(m1), [m2] "v"(m2), [m3] "v"(m3)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory");
#undef KILN_MATVEC_ROW
#undef KILN_MATVEC_SUM
  t[0] = _mm512_add_epi32(t[0], r0);
  t[1] = _mm512_add_epi32(t[1], r1);
  t[2] = _mm512_add_epi32(t[2], r2);
  t[3] = _mm512_add_epi32(t[3], r3);
}
#endif

/// The sums of a tile of C weight rows w + c * stride over chunk pairs [j0, j1) (pairs
/// from `pairs` on: the odd last chunk alone), into t[c]; see sums().
template <class Scheme>
inline void tile(const std::uint8_t* w, index_t stride, const std::int8_t* xs, index_t j0, index_t j1, index_t pairs,
                 bool pf, __m512i (&t)[C]) noexcept {
  for (int c = 0; c < C; ++c) t[c] = _mm512_setzero_si512();
  const index_t jw = std::min(j1, pairs);
  if (jw > j0) {
#if defined(__GNUC__)
    if constexpr (planes<Scheme> == 4 && C == 4) ternary_sums(w, stride, xs, j0, jw, pf, t);
    else sums<Scheme, true>(w, stride, xs, j0, jw, pf, t);
#else
    sums<Scheme, true>(w, stride, xs, j0, jw, pf, t);
#endif
  }
  if (j1 > pairs) sums<Scheme, false>(w, stride, xs, pairs, j1, pf, t);
}

/// out[n] = sum over segments of (sum_{k in segment} (code[n][k] - offset) * x[k]) as a
/// float, for the `rows` weight rows from w (row_bytes apart, chunks * 32 bytes each; one
/// scale per row, applied by the caller), C rows at a time (a last partial tile takes the
/// last C rows again, storing only the new ones): xs, x arranged by arrange(); xoff:
/// offset * sum(x) per segment of flush_planes planes (segment_offsets with gsub 0).
/// Each tile fetches the rows of the tile ahead_tiles on, a line per row and chunk pair
/// (rows of a few hundred bytes are too short for the hardware prefetcher to reach full
/// speed alone), up to row `rows + ahead` (what the caller's tensor holds past these).
template <class Scheme>
void rows(const std::uint8_t* w, index_t row_bytes, index_t rows, const std::int8_t* xs, index_t chunks,
          const std::int32_t* xoff, float* out, index_t ahead = 0) noexcept {
  constexpr int P = planes<Scheme>;
  constexpr index_t seg_pairs = flush_planes / P / 2;  // chunk pairs per segment
  const index_t pairs = chunks / 2;                     // whole pairs (an odd last chunk after them)
  const index_t all = (chunks + 1) / 2;                 // pairs, the odd last chunk's included
  for (index_t n0 = 0; n0 < rows; n0 += C) {
    // a full tile; the last C rows again for a partial one; fewer than C rows: each alone
    const index_t first = rows < C ? n0 : std::min(n0, rows - C);
    const index_t stride = rows < C ? 0 : row_bytes;
    const bool pf = rows >= C && n0 + (ahead_tiles + 1) * C <= rows + ahead;
    __m128 f = _mm_setzero_ps();
    for (index_t j0 = 0, g = 0; j0 < all; j0 += seg_pairs, ++g) {
      __m512i t[C];
      tile<Scheme>(w + first * row_bytes, stride, xs, j0, std::min(all, j0 + seg_pairs), pairs, pf, t);
      f = _mm_add_ps(f, _mm_cvtepi32_ps(_mm_sub_epi32(sum4(t), _mm_set1_epi32(xoff[g]))));
    }
    alignas(16) float v[C];
    _mm_store_ps(v, f);
    if (rows < C) {
      out[n0] = v[0];
      n0 += 1 - C;  // the next row alone
    } else {
      for (index_t n = n0; n < std::min(rows, n0 + C); ++n) out[n] = v[n - first];
    }
  }
}

}  // namespace kiln::detail::cpu_quant::matvec

#endif
