// kiln/cpu/quant/matvec.hpp — the decode kernel of the CPU quantized matmul (one row of
// activations; one scale per weight row, or per group: grouped_rows): 512-bit vpdpbusd
// over pairs of 32-byte chunks, one accumulator per plane, the planes masked in place
// instead of shifted down.
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
// other processes; three tiles about the same as two, four and six more), into the L2
// (prefetcht1): into the L1 (prefetcht0) one Zen 4 core streamed int8 rows of K = 2048
// and 5632 from memory at 15-17 GB/s, ternary rows of K = 2560 and 6912 at 12-15, and
// 19-26 and 18-24 into the L2 (thread CPU time, interleaved builds): the L1's few
// outstanding misses bound the stream.
// Grouped scales (int8 and int4 in groups of 32-128): grouped_rows, below.
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

/// A chunk pair of a row (Whole: 64 bytes) or the odd last chunk (32, zeros after), in a
/// register.
template <bool Whole>
inline __m512i row_pair(const std::uint8_t* src) noexcept {
  __m512i v = Whole ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8(__mmask64(0xFFFFFFFFull), src);
  in_register(v);
  return v;
}

/// Plane p of the codes in v, masked in place (2^(bits p) times the plane's codes).
template <class Scheme>
inline __m512i plane(__m512i v, int p) noexcept {
  if constexpr (planes<Scheme> == 1) return v;
  else return _mm512_and_si512(v, _mm512_set1_epi8(char(((1 << Scheme::bits) - 1) << (Scheme::bits * p))));
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
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(nx + (j * C + c) * 64), _MM_HINT_T1);
    }
    __m512i xv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) xv[p] = _mm512_loadu_si512(xs + (j * P + p) * 64);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i v = row_pair<Whole>(w + c * stride + j * 64);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[c][p] = dpbusd(acc[c][p], plane<Scheme>(v, p), xv[p]);
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
      "prefetcht1 (%[nx])\n\t prefetcht1 64(%[nx])\n\t prefetcht1 128(%[nx])\n\t prefetcht1 192(%[nx])\n\t"
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


// ---------------------------------------------------------------------------------------
// Scales per group along K (int8 and int4 with groups of 32, 64 or 128 weights: the
// decode step of an int4 g32 model). Each plane of a chunk pair (64 bytes of a row) is
// one vpdpbusd as above, whose 16 int32 lanes hold two sub-vectors of 32 weights: lanes
// 0-7 chunk 2j, lanes 8-15 chunk 2j + 1. Their sums start at the sub-vectors' offset
// terms (arrange_offsets: -offset * sum(x) over the 32, in lanes 0 and 8, shared by the
// tile's rows) and are converted to float at once, multiplied by their groups' scales
// and added into one float accumulator per row and plane: the scale vector (lanes 0-7
// the scale of the group of chunk 2j's sub-vector, lanes 8-15 chunk 2j + 1's) is one
// vpermps of the 16 scales a row loads per block of 16 groups, with index vectors that
// depend only on the pair's place in the block (scale_index). Per 64 bytes of a row and
// plane: vpandd, vpdpbusd, vcvtdq2ps, vpermps, vfmadd, where dot.hpp's 256-bit tile
// took a shift, a mask, the vpdpbusd, a conversion, a broadcast and a multiply-add per
// 32 bytes. Plane p's codes are masked in place (2^(bits p) times its own), so its
// accumulator is 2^(bits p) times the plane's share: an exact factor taken back at the
// end. Each product of an int32 sum with its scale is rounded once, as in dot.hpp; the
// additions run in another order (16 lanes, plane by plane).

/// The scales of lanes m (16 at most) from s as floats, 0 elsewhere.
inline __m512 load_scales(__mmask16 m, const float* s) noexcept { return _mm512_maskz_loadu_ps(m, s); }
inline __m512 load_scales(__mmask16 m, const half* s) noexcept {  // int4's f16 scales
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s));
}

/// Sub-vectors of 32 weights per group: 1, 2 or 4.
inline constexpr int max_gsub = 4;

/// Chunk pairs per block of 16 groups (whole pairs for every scheme and gsub here).
template <class Scheme>
constexpr index_t block_pairs(index_t gsub) noexcept {
  return 8 * gsub / planes<Scheme>;
}

/// The vpermps indices of pair jj of a block and plane p, at
/// scale_index<Scheme>(gsub) + (jj * P + p) * 16: lanes 0-7 the group (from the block's
/// first) of chunk 2jj's sub-vector p, lanes 8-15 of chunk 2jj + 1's.
template <class Scheme>
const std::int32_t* scale_index(index_t gsub) noexcept {
  constexpr int P = planes<Scheme>;
  constexpr index_t most = 8 * max_gsub / P;  // pairs of the largest block
  struct table {
    alignas(64) std::int32_t v[3][most * P * 16];
  };
  static const table t = [] {
    table r{};
    for (int k = 0; k < 3; ++k) {
      const index_t gs = index_t(1) << k;
      for (index_t jj = 0; jj < block_pairs<Scheme>(gs); ++jj)
        for (int p = 0; p < P; ++p)
          for (int l = 0; l < 16; ++l) r.v[k][(jj * P + p) * 16 + l] = std::int32_t(((2 * jj + l / 8) * P + p) / gs);
    }
    return r;
  }();
  return t.v[gsub == 1 ? 0 : gsub == 2 ? 1 : 2];
}

/// Int32 words of arrange_offsets' output for a row of `chunks` chunks.
template <class Scheme>
constexpr index_t offset_words(index_t chunks) noexcept {
  return (chunks + 1) / 2 * planes<Scheme> * 16;
}

/// The starting sums of the grouped tiles: for chunk pair j and plane p, 16 int32 at
/// dst + (j * P + p) * 16, lane 0 -offset * sum(x) over sub-vector p of chunk 2j times
/// 2^(bits p) (the plane's codes are masked in place), lane 8 the same for chunk 2j + 1
/// (0 past the last chunk), the other lanes 0.
template <class Scheme>
void arrange_offsets(const std::int8_t* x, index_t chunks, std::int32_t* dst) noexcept {
  constexpr int P = planes<Scheme>;
  std::memset(dst, 0, sizeof(std::int32_t) * std::size_t(offset_words<Scheme>(chunks)));
  for (index_t c = 0; c < chunks; ++c) {
    for (int p = 0; p < P; ++p) {
      std::int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += x[c * Scheme::chunk + 32 * p + i];
      const std::int32_t factor = P == 1 ? 1 : std::int32_t(1) << (Scheme::bits * p);
      dst[((c / 2) * P + p) * 16 + (c % 2) * 8] = -Scheme::offset * sum * factor;
    }
  }
}

/// acc[c][p] += the scaled sums of C weight rows w + c * stride (scales sc + c * sstride,
/// `groups` of them) over chunk pairs [j0, j1) of one block (its first group g0, index
/// vectors ix) of xs / xo (Whole: 64 bytes a row; else the odd last chunk, 32); with pf,
/// the rows of the tile ahead_tiles on are fetched line by line (nsc: their scales).
template <class Scheme, bool Whole>
inline void grouped_sums(const std::uint8_t* w, index_t stride, const __m512 (&sv)[C], const std::int8_t* xs,
                         const std::int32_t* xo, const std::int32_t* ix, index_t j0, index_t j1, bool pf,
                         __m512 (&acc)[C][planes<Scheme>]) noexcept {
  constexpr int P = planes<Scheme>;
  const std::uint8_t* const nx = w + ahead_tiles * C * stride;
  for (index_t j = j0; j < j1; ++j, ix += P * 16) {
    if (pf) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(nx + c * stride + j * 64), _MM_HINT_T1);
    }
    __m512i xv[P], ov[P], iv[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      xv[p] = _mm512_loadu_si512(xs + (j * P + p) * 64);
      ov[p] = _mm512_loadu_si512(xo + (j * P + p) * 16);
      iv[p] = _mm512_load_si512(ix + p * 16);
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512i v = row_pair<Whole>(w + c * stride + j * 64);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        const __m512 f = _mm512_cvtepi32_ps(dpbusd(ov[p], plane<Scheme>(v, p), xv[p]));
        acc[c][p] = _mm512_fmadd_ps(f, _mm512_permutexvar_ps(iv[p], sv[c]), acc[c][p]);
      }
    }
  }
}

/// out[n] = sum over groups g of scale[n][g] * sum_{k in g} (code[n][k] - offset) * x[k]
/// for the `rows` weight rows from w (row_bytes apart, chunks * 32 bytes each) with
/// `groups` scales a row (sstride apart) of gsub sub-vectors each (1, 2 or 4), C rows at a
/// time as rows() does: xs from arrange(), xo from arrange_offsets(). Fetches ahead as
/// rows() does (the scales too), up to row `rows + ahead`.
template <class Scheme>
void grouped_rows(const std::uint8_t* w, index_t row_bytes, index_t rows, const scale_t<Scheme>* scales, index_t sstride,
                  index_t groups, index_t gsub, const std::int8_t* xs, const std::int32_t* xo, index_t chunks,
                  float* out, index_t ahead = 0) noexcept {
  constexpr int P = planes<Scheme>;
  const index_t bp = block_pairs<Scheme>(gsub);
  const std::int32_t* const index = scale_index<Scheme>(gsub);
  const index_t pairs = chunks / 2, all = (chunks + 1) / 2;
  for (index_t n0 = 0; n0 < rows; n0 += C) {
    const index_t first = rows < C ? n0 : std::min(n0, rows - C);
    const index_t stride = rows < C ? 0 : row_bytes, sc_stride = rows < C ? 0 : sstride;
    const bool pf = rows >= C && n0 + (ahead_tiles + 1) * C <= rows + ahead;
    const std::uint8_t* const wt = w + first * row_bytes;
    const scale_t<Scheme>* const st = scales + first * sstride;
    __m512 acc[C][P];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) acc[c][p] = _mm512_setzero_ps();
    for (index_t j0 = 0, g0 = 0; j0 < all; j0 += bp, g0 += 16) {
      const index_t left = groups - g0;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
      __m512 sv[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        sv[c] = load_scales(m, st + c * sc_stride + g0);
        if (pf) _mm_prefetch(reinterpret_cast<const char*>(st + (ahead_tiles * C + c) * sc_stride + g0), _MM_HINT_T1);
      }
      const index_t j1 = std::min(all, j0 + bp), jw = std::min(j1, pairs);
      if (jw > j0) grouped_sums<Scheme, true>(wt, stride, sv, xs, xo, index, j0, jw, pf, acc);
      if (j1 > jw) grouped_sums<Scheme, false>(wt, stride, sv, xs, xo, index + (jw - j0) * P * 16, jw, j1, pf, acc);
    }
    alignas(16) float v[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m512 a = acc[c][0];
#pragma GCC unroll 2
      for (int p = 1; p < P; ++p) a = _mm512_fmadd_ps(acc[c][p], _mm512_set1_ps(1.0f / float(1 << (Scheme::bits * p))), a);
      v[c] = _mm512_reduce_add_ps(a);
    }
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
