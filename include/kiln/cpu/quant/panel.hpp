// kiln/cpu/quant/panel.hpp — the prefill kernel of the CPU quantized matmul (many rows
// of activations): weight rows unpacked into column panels, output columns along the
// vector lanes, so that a group's rescale is one float multiply-add per 16 outputs.
//
// The 4 x 4 tiles of cpu/quant/dot.hpp hold one output per vector (lanes along k, summed
// at the end): with groups of 32 weights, each output pays a conversion and a float
// multiply-add per vpdpbusd, three instructions where int8 per row takes one. Here a
// panel holds 32 weight rows (output columns) with, per step of four k, their four
// unsigned codes side by side (128 bytes: two vectors of 16 int32 lanes); the activation
// row's four bytes are broadcast, so one vpdpbusd adds four products to each of 16
// outputs, and a group of 32 k takes 8 of them per vector before its int32 sums are
// converted and multiplied by the 16 columns' scales (one load) into float accumulators:
// 2 instructions per 8, for every scheme (int8 per row or per group, int4, ternary), the
// codes unpacked once per panel (shift and mask, cpu/quant/dot.hpp) and not per row.
// A tile: MR = 6 activation rows x 32 columns (12 int32 and 12 float accumulators).
// The offset of the stored codes is taken back as dot.hpp does: each segment's int32
// sums start at -offset * sum(x) over it.
// Built where the compiler targets AVX-512 VNNI (512-bit vpdpbusd); elsewhere the
// products keep the tiles of dot.hpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "kiln/core/shape.hpp"
#include "kiln/cpu/gemm/pack.hpp"  // transpose_square
#include "kiln/cpu/quant/dot.hpp"

#if defined(KILN_QUANT_HAS_VNNI) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define KILN_QUANT_HAS_PANELS 1

namespace kiln::detail::cpu_quant::panel {

/// Activation rows per tile and output columns per panel.
inline constexpr int MR = 6;
inline constexpr int NP = 32;

/// Packs weight rows [n0, n0 + nc) (nc <= NP) of a codes tensor (row_bytes apart, chunks
/// 32-byte chunks each) into the panel at dst (Kp = chunks * Scheme::chunk weights a
/// column, Kp * NP bytes): byte 4 c + k % 4 of step k / 4 is column c's code of weight k
/// (the stored, unsigned code).
/// Columns past nc get the code worth 0. grouped: the columns' scales too, per group the
/// 32 of them (0 past nc) at sdst (groups * NP floats).
template <class Scheme>
void pack(const std::uint8_t* codes, index_t row_bytes, index_t chunks, index_t n0, index_t nc, const scale_t<Scheme>* scales,
          index_t sstride, index_t groups, bool grouped, std::uint8_t* dst, float* sdst) noexcept {
  constexpr int P = planes<Scheme>;
  const index_t steps = chunks * Scheme::chunk / 4;
  const std::uint32_t pad = std::uint32_t(Scheme::offset) * 0x01010101u;
  for (index_t c = nc; c < NP; ++c) {
    for (index_t s = 0; s < steps; ++s) std::memcpy(dst + s * 4 * NP + 4 * c, &pad, 4);
  }
  // chunk by chunk across the columns, 16 columns at a time: each plane of their chunk
  // (8 steps of four codes a column) transposed in registers as a 16 x 16 square of int32
  // words (each column's upper 8 zero), a step's 16 words stored at once (a word at a
  // time: 16% of an int4 product at M = 128 went to packing, 14% this way, most of the
  // rest the weight's first read from memory).
  using A = xsimd::avx512f;
  for (index_t ch = 0; ch < chunks; ++ch) {
    for (index_t c0 = 0; c0 < nc; c0 += 16) {
      __m256i v[16];
      simd256::load_columns<Scheme>(codes, row_bytes, n0, c0, nc, ch, v);
      [&]<int... Pi>(std::integer_sequence<int, Pi...>) {
        (
            [&] {
              // plane Pi: weights ch * chunk + 32 Pi + (0 .. 32), eight steps of four
              cpu_gemm::fvec<A> rows[16];
#pragma GCC unroll 16
              for (int i = 0; i < 16; ++i) {
                rows[i] = _mm512_castsi512_ps(_mm512_zextsi256_si512(simd256::unpack<Scheme, Pi>(v[i])));
              }
              std::uint8_t* d = dst + (ch * Scheme::chunk + 32 * Pi) * NP + 4 * c0;
              cpu_gemm::transpose_square<A>(rows, [&](int s, __m512 x) {
                if (s < 8) _mm512_storeu_ps(reinterpret_cast<float*>(d + s * 4 * NP), x);
              });
            }(),
            ...);
      }(std::make_integer_sequence<int, P>{});
    }
  }
  if (grouped) {
    for (index_t g = 0; g < groups; ++g) {
      for (index_t c = 0; c < NP; ++c) sdst[g * NP + c] = c < nc ? scale_value(scales[(n0 + c) * sstride + g]) : 0.0f;
    }
  }
}

/// acc + sum by fours of u (unsigned bytes) * x (signed bytes). GCC does not keep the
/// accumulator of the vpdpbusd intrinsic in its register across a loop: it copied each of
/// the tile's 12 accumulators once per step (12 moves per 12 vpdpbusd); the asm ties it.
inline __m512i dpbusd(__m512i acc, __m512i u, __m512i x) noexcept {
#if defined(__GNUC__)
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(x));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, u, x);
#endif
}

/// out[r * NP + c] = sum over segments g of s(g, c) * sum_{k in g} (code[c][k] - offset) * x[r][k]
/// for the MR rows x[r] (int8, Kp long, zero past K) and the panel's 32 columns; seg_k:
/// weights per segment (a group, or flush_planes * 32 for one scale per row, then s = 1);
/// groups: the segments with a scale (those past them hold padding only, worth 0);
/// psc: the panel's scales (grouped); xoff[r]: offset * sum(x[r]) per segment.
template <bool Grouped>
void tile(const std::uint8_t* panel, const float* psc, const std::int8_t* const* x, const std::int32_t* const* xoff,
          index_t Kp, index_t seg_k, index_t groups, float* out) noexcept {
  __m512 fa[MR][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) fa[r][0] = fa[r][1] = _mm512_setzero_ps();
  for (index_t g = 0, k0 = 0; k0 < Kp && !(Grouped && g >= groups); ++g, k0 += seg_k) {
    const index_t k1 = k0 + seg_k < Kp ? k0 + seg_k : Kp;
    __m512i acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_set1_epi32(-xoff[r][g]);
    const std::uint8_t* w = panel + k0 * NP;
    for (index_t k = k0; k < k1; k += 4, w += 4 * NP) {
      const __m512i w0 = _mm512_load_si512(w), w1 = _mm512_load_si512(w + 64);
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        std::int32_t xv;
        std::memcpy(&xv, x[r] + k, 4);
        const __m512i xb = _mm512_set1_epi32(xv);
        acc[r][0] = dpbusd(acc[r][0], w0, xb);
        acc[r][1] = dpbusd(acc[r][1], w1, xb);
      }
    }
    if constexpr (Grouped) {
      const __m512 s0 = _mm512_loadu_ps(psc + g * NP), s1 = _mm512_loadu_ps(psc + g * NP + 16);
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        fa[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]), s0, fa[r][0]);
        fa[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][1]), s1, fa[r][1]);
      }
    } else {
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        fa[r][0] = _mm512_add_ps(_mm512_cvtepi32_ps(acc[r][0]), fa[r][0]);
        fa[r][1] = _mm512_add_ps(_mm512_cvtepi32_ps(acc[r][1]), fa[r][1]);
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(out + r * NP, fa[r][0]);
    _mm512_storeu_ps(out + r * NP + 16, fa[r][1]);
  }
}

}  // namespace kiln::detail::cpu_quant::panel

#endif

// The AVX2 panels (no VNNI: vpmaddubsw), for codes of at most 4 bits (int4, ternary).
// The layout is the one above with 16 columns a panel (two vectors of 8 int32 lanes):
// per step of four k, column c's four codes in word c. A step multiplies each of a row's
// two panel vectors with the row's four activation bytes broadcast (vpmaddubsw: unsigned
// code times signed byte, pairs summed into int16 lanes) and adds the result in int16:
// a code below 16 times |x| <= 127, two of them, is at most 3810, so 8 steps (a group of
// 32 k) fit an int16 lane (30480; ternary codes below 4: 32 steps). Then vpmaddwd with
// ones sums each column's two int16 lanes into its int32 segment sum (kept in memory,
// beside the float accumulators): one vpmaddubsw per 32 products, where dot.hpp's tiles
// pay a vpmaddubsw, a vpmaddwd and an add per 32, and per group a conversion, a
// broadcast scale and a multiply-add per output. The segments' int32 sums are exact and
// start at -offset * sum(x), as above: the same arithmetic as the VNNI panels.
// A tile: MR = 6 activation rows x 16 columns (12 int16 accumulators, the two panel
// vectors and a broadcast row: 15 of the 16 registers).
#if defined(__AVX2__)
#define KILN_QUANT_HAS_PANELS256 1

namespace kiln::detail::cpu_quant::panel256 {

/// Activation rows per tile and output columns per panel.
inline constexpr int MR = 6;
inline constexpr int NP = 16;

/// The schemes these panels take: codes whose vpmaddubsw pair sums add up in int16.
template <class Scheme>
inline constexpr bool takes = Scheme::bits <= 4;

/// Steps of four k summed in int16 lanes before they go to int32 (see above).
template <class Scheme>
inline constexpr index_t int16_steps = Scheme::bits <= 2 ? 32 : 8;

/// panel::pack's layout with NP = 16 columns (codes unpacked once per panel: an 8 x 8
/// square of int32 words, 8 columns by 8 steps, transposed in registers).
template <class Scheme>
void pack(const std::uint8_t* codes, index_t row_bytes, index_t chunks, index_t n0, index_t nc, const scale_t<Scheme>* scales,
          index_t sstride, index_t groups, bool grouped, std::uint8_t* dst, float* sdst) noexcept {
  static_assert(takes<Scheme>);
  constexpr int P = planes<Scheme>;
  using A = xsimd::avx2;
  for (index_t ch = 0; ch < chunks; ++ch) {
    for (index_t c0 = 0; c0 < NP; c0 += 8) {
      __m256i v[8];
      simd256::load_columns<Scheme>(codes, row_bytes, n0, c0, nc, ch, v);
      [&]<int... Pi>(std::integer_sequence<int, Pi...>) {
        (
            [&] {
              cpu_gemm::fvec<A> rows[8];
#pragma GCC unroll 8
              for (int i = 0; i < 8; ++i) rows[i] = _mm256_castsi256_ps(simd256::unpack<Scheme, Pi>(v[i]));
              std::uint8_t* d = dst + (ch * Scheme::chunk + 32 * Pi) * NP + 4 * c0;
              cpu_gemm::transpose_square<A>(rows, [&](int s, __m256 x) {
                _mm256_storeu_ps(reinterpret_cast<float*>(d + s * 4 * NP), x);
              });
            }(),
            ...);
      }(std::make_integer_sequence<int, P>{});
    }
  }
  if (grouped) {
    for (index_t g = 0; g < groups; ++g) {
      for (index_t c = 0; c < NP; ++c) sdst[g * NP + c] = c < nc ? scale_value(scales[(n0 + c) * sstride + g]) : 0.0f;
    }
  }
}

/// panel::tile's result (out[r * NP + c], the segments' exact int32 sums times their
/// scales, added in order) for the MR rows x[r] and the panel's 16 columns.
template <class Scheme, bool Grouped>
void tile(const std::uint8_t* panel, const float* psc, const std::int8_t* const* x, const std::int32_t* const* xoff,
          index_t Kp, index_t seg_k, index_t groups, float* out) noexcept {
  static_assert(takes<Scheme>);
  alignas(32) std::int32_t seg[MR * NP];
  const __m256i ones = _mm256_set1_epi16(1);
  for (int i = 0; i < MR * NP; ++i) out[i] = 0.0f;
  for (index_t g = 0, k0 = 0; k0 < Kp && !(Grouped && g >= groups); ++g, k0 += seg_k) {
    const index_t k1 = k0 + seg_k < Kp ? k0 + seg_k : Kp;
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256i o = _mm256_set1_epi32(-xoff[r][g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(seg + r * NP), o);
      _mm256_store_si256(reinterpret_cast<__m256i*>(seg + r * NP + 8), o);
    }
    for (index_t kb = k0; kb < k1; kb += 4 * int16_steps<Scheme>) {
      const index_t ke = kb + 4 * int16_steps<Scheme> < k1 ? kb + 4 * int16_steps<Scheme> : k1;
      __m256i acc[MR][2];
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
      const std::uint8_t* w = panel + kb * NP;
      for (index_t k = kb; k < ke; k += 4, w += 4 * NP) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w));
        const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 32));
#pragma GCC unroll 6
        for (int r = 0; r < MR; ++r) {
          std::int32_t xv;
          std::memcpy(&xv, x[r] + k, 4);
          const __m256i xb = _mm256_set1_epi32(xv);
          acc[r][0] = _mm256_add_epi16(acc[r][0], _mm256_maddubs_epi16(w0, xb));
          acc[r][1] = _mm256_add_epi16(acc[r][1], _mm256_maddubs_epi16(w1, xb));
        }
      }
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        for (int h = 0; h < 2; ++h) {
          auto* s = reinterpret_cast<__m256i*>(seg + r * NP + 8 * h);
          _mm256_store_si256(s, _mm256_add_epi32(_mm256_load_si256(s), _mm256_madd_epi16(acc[r][h], ones)));
        }
      }
    }
    const __m256 s0 = Grouped ? _mm256_loadu_ps(psc + g * NP) : _mm256_set1_ps(1.0f);
    const __m256 s1 = Grouped ? _mm256_loadu_ps(psc + g * NP + 8) : _mm256_set1_ps(1.0f);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      for (int h = 0; h < 2; ++h) {
        float* o = out + r * NP + 8 * h;
        const __m256 v = _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(seg + r * NP + 8 * h)));
#if defined(__FMA__)
        _mm256_storeu_ps(o, Grouped ? _mm256_fmadd_ps(v, h ? s1 : s0, _mm256_loadu_ps(o)) : _mm256_add_ps(v, _mm256_loadu_ps(o)));
#else
        _mm256_storeu_ps(o, _mm256_add_ps(Grouped ? _mm256_mul_ps(v, h ? s1 : s0) : v, _mm256_loadu_ps(o)));
#endif
      }
    }
  }
}

}  // namespace kiln::detail::cpu_quant::panel256

#endif
