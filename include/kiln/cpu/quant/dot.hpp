// kiln/cpu/quant/dot.hpp — the integer micro-kernel of the CPU quantized matmul: R rows
// of int8 activations times C rows of packed codes (ops/quant/scheme.hpp's format), with
// int32 accumulation per scale group and one float multiply-add per group.
//
// Per 32-byte chunk of a weight row, one load gives 32 weights (int8), 64 (int4: the
// low and high nibbles) or 128 (ternary: four 2-bit planes): each plane is unpacked to
// 32 unsigned bytes with a shift and a mask, in registers, and multiplied with the 32
// matching activation bytes into eight int32 lanes:
//   vnni   AVX-512 VNNI (256-bit, with AVX-512VL) or AVX-VNNI: vpdpbusd, one instruction
//          for 32 products summed by fours;
//   avx2   vpmaddubsw (pairs into int16) and vpmaddwd (pairs into int32); int8 codes go
//          through the sign trick (|code| times x with code's sign), since unsigned codes
//          up to 255 times 127 would saturate the int16 pairs;
//   portable  plain loops, for every other CPU.
// The stored codes are unsigned (code + offset); the offset's share, offset * sum(x) per
// segment of a row, is computed once per activation row (segment_offsets, not per
// weight row) and starts each segment's sums, so every path yields the exact sum of
// code * x.
// Ternary and int4 codes are never unpacked to memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kiln/core/half.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ops/quant/scheme.hpp"

namespace kiln::detail::cpu_quant {

/// The instruction sets the kernel has a path for (isa_best: the best this build allows).
struct isa_portable {
  static constexpr const char* name = "portable";
};
#if defined(__AVX2__)
struct isa_avx2 {
  static constexpr const char* name = "avx2";
};
#endif
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define KILN_QUANT_HAS_VNNI 1
struct isa_vnni {
  static constexpr const char* name = "vnni";
};
using isa_best = isa_vnni;
#elif defined(__AVX2__)
using isa_best = isa_avx2;
#else
using isa_best = isa_portable;
#endif

/// Sub-vectors of 32 weights per 32-byte chunk.
template <class Scheme>
inline constexpr int planes = 8 / Scheme::bits;

/// The scales' element type of Scheme (int4: f16).
template <class Scheme>
using scale_t = typename Scheme::scale_type;

/// A stored scale as a float.
inline float scale_value(float s) noexcept { return s; }
inline float scale_value(half s) noexcept {
#if defined(__F16C__) && defined(__AVX2__)  // (immintrin.h is included with AVX2)
  return _cvtsh_ss(s.bits);
#else
  return float(s);
#endif
}

/// Activation sub-vectors of 32 weights each up to this many are summed in int32 before
/// they are added into a float (per-row scales: int32 lanes stay far from overflow).
inline constexpr index_t flush_planes = 2048;

/// The code of weight k of a packed row (unsigned, offset included): the format's
/// definition, used by the portable path, dequantize and quantize.
template <class Scheme>
inline int code_at(const std::uint8_t* row, index_t k) noexcept {
  const index_t c = k / Scheme::chunk, r = k % Scheme::chunk;
  const std::uint8_t b = row[c * 32 + (r % 32)];
  if constexpr (Scheme::bits == 8) return b;
  else return (b >> (Scheme::bits * int(r / 32))) & ((1 << Scheme::bits) - 1);
}

/// offset * sum(x) over each segment of a row of Kp int8 activations (segments of `gsub`
/// planes of 32, or flush_planes when gsub is 0) into dst (one per segment).
template <class Scheme>
inline void segment_offsets(const std::int8_t* x, index_t Kp, index_t gsub, std::int32_t* dst) noexcept {
  const index_t seg = (gsub > 0 ? gsub : flush_planes) * 32;
  for (index_t s0 = 0, i = 0; s0 < Kp; s0 += seg, ++i) {
    std::int32_t sum = 0;
    for (index_t k = s0; k < s0 + seg && k < Kp; ++k) sum += x[k];
    dst[i] = sum * Scheme::offset;
  }
}

/// Segments of a row of Kp activations (see segment_offsets).
inline index_t segments(index_t Kp, index_t gsub) noexcept {
  const index_t seg = (gsub > 0 ? gsub : flush_planes) * 32;
  return (Kp + seg - 1) / seg;
}

/// out[r][c] = sum over groups g of scale(c, g) * sum_{k in g} (code[c][k] - offset) * x[r][k],
/// for R activation rows x[r] (int8, zero beyond K up to chunks * chunk) and C code rows
/// w[c] (chunks * 32 bytes each). gsub: 32-weight planes per group (0: one group for the
/// whole row, scale 1); sc[c]: row c's scales, one per group (unused when gsub is 0), of
/// which there are `groups` (the padding past K can make a segment more: it sums to 0
/// and its scale, past the row's, is never read);
/// xoff[r]: offset * sum(x[r]) over each segment (a group, or flush_planes planes when
/// gsub is 0), from segment_offsets() (the portable path does not need it); next[c]:
/// the rows the caller runs next (or null), fetched ahead line by line into the L2: rows
/// of a few KiB are too short for the hardware prefetcher to reach full speed on its own.
template <class Scheme, int R, int C>
void qdot(isa_portable, const std::uint8_t* const* w, const std::int8_t* const* x, index_t chunks, index_t gsub,
          const scale_t<Scheme>* const* sc, index_t groups, float (&out)[R][C], const std::int32_t* const* = nullptr,
          const std::uint8_t* const* = nullptr) {
  const index_t K = chunks * Scheme::chunk;
  const index_t group = gsub > 0 ? gsub * 32 : flush_planes * 32;
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float f = 0.0f;
      for (index_t g0 = 0, gi = 0; g0 < K; g0 += group, ++gi) {
        std::int32_t acc = 0;
        const index_t g1 = g0 + group < K ? g0 + group : K;
        for (index_t k = g0; k < g1; ++k) acc += (code_at<Scheme>(w[c], k) - Scheme::offset) * int(x[r][k]);
        if (gsub > 0 && gi >= groups) break;  // padding only
        f += float(acc) * (gsub > 0 ? scale_value(sc[c][gi]) : 1.0f);
      }
      out[r][c] = f;
    }
  }
}

#if defined(__AVX2__)
namespace simd256 {

/// Plane P of a 32-byte chunk as 32 unsigned bytes.
template <class Scheme, int P>
inline __m256i unpack(__m256i v) noexcept {
  if constexpr (Scheme::bits == 8) {
    return v;
  } else {
    const __m256i mask = _mm256_set1_epi8(char((1 << Scheme::bits) - 1));
    if constexpr (P == 0) return _mm256_and_si256(v, mask);
    else return _mm256_and_si256(_mm256_srli_epi16(v, Scheme::bits * P), mask);  // bits cross bytes, the mask drops them
  }
}

inline float hsum(__m256 v) noexcept {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/// The byte whose every plane holds the code worth 0 (the offset): a padding column's.
template <class Scheme>
inline constexpr unsigned pad_byte = [] {
  unsigned b = 0;
  for (int p = 0; p < planes<Scheme>; ++p) b |= unsigned(Scheme::offset) << (Scheme::bits * p);
  return b;
}();

/// Chunk ch of the n code rows from codes + (n0 + c0) * row_bytes into v[0 .. n), for the
/// columns c0 + i < nc; the rest padding (pad_byte).
template <class Scheme, int n>
inline void load_columns(const std::uint8_t* codes, index_t row_bytes, index_t n0, index_t c0, index_t nc, index_t ch,
                         __m256i (&v)[n]) noexcept {
#pragma GCC unroll 16
  for (int i = 0; i < n; ++i) {
    v[i] = c0 + i < nc ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (n0 + c0 + i) * row_bytes + ch * 32))
                       : _mm256_set1_epi8(char(pad_byte<Scheme>));
  }
}

/// acc + sum by fours of u (unsigned bytes) * x (signed bytes), as int32 lanes.
template <class Isa>
inline __m256i dot(__m256i acc, __m256i u, __m256i x) noexcept {
#if defined(KILN_QUANT_HAS_VNNI)
  if constexpr (std::is_same_v<Isa, isa_vnni>) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, x);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, x);
#endif
  } else
#endif
  {
    // u <= 15 here (int4 and ternary codes; int8 takes dot_signed): the int16 pair sums cannot saturate
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
  }
}

/// True where the path multiplies the signed codes directly (no offset to take back).
template <class Scheme, class Isa>
inline constexpr bool signed_codes = Scheme::bits == 8 && std::is_same_v<Isa, isa_avx2>;

/// acc + sum by fours of (u - 128) * x for int8 codes u on AVX2 (the sign trick).
inline __m256i dot_signed(__m256i acc, __m256i u, __m256i x) noexcept {
  const __m256i s = _mm256_xor_si256(u, _mm256_set1_epi8(char(0x80)));  // the signed code
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(s, s), _mm256_sign_epi8(x, s));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/// The one-row tile of int4 in groups of 32 on AVX2 (the decode step): eight groups (four
/// chunks) of a weight row at a time, each plane's vpmaddubsw / vpmaddwd int32 lanes
/// reduced with vphaddd into one vector of the eight groups' sums, their offsets taken
/// back at once, converted and multiplied by the eight scales (one vcvtph2ps) into a
/// float accumulator. The 1 x 4 tile of qdot paid, per group and weight row, a lane
/// setup of the offset, a conversion, a scalar scale conversion and broadcast and a
/// multiply-add. The groups' int32 sums are exact; the float sums go in another order.
#if defined(__F16C__) && defined(__FMA__)
template <int C>
void int4_g32_row(const std::uint8_t* const* w, const std::int8_t* x, index_t chunks, const half* const* sc,
                  index_t groups, float (&out)[1][C], const std::int32_t* xoff, const std::uint8_t* const* next) {
  const __m256i mask = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 fa[C];
  for (int c = 0; c < C; ++c) fa[c] = _mm256_setzero_ps();
  // eight groups' int32 sums (p[0..7]: eight lanes each) as one vector in group order
  const auto reduce = [](const __m256i (&p)[8]) {
    const __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
  };
  // whole blocks of 8 groups, each group's scale in the row (the rest below: a padding
  // plane past the last group is never multiplied by a scale read past the row)
  const index_t blocks = std::min<index_t>(chunks / 4, groups / 8);
  for (index_t b = 0; b < blocks; ++b) {
    const index_t ch0 = b * 4;
    if (next) {  // the next rows' two lines of this block, into the L2 (as qdot)
      for (int c = 0; c < C; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(next[c] + ch0 * 32), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(next[c] + ch0 * 32 + 64), _MM_HINT_T1);
      }
    }
    __m256i xv[8];
    for (int i = 0; i < 8; ++i) xv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + ch0 * 64 + 32 * i));
    const __m256i off = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xoff + 8 * b));
    for (int c = 0; c < C; ++c) {
      __m256i p[8];
      for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c] + (ch0 + j) * 32));
        p[2 * j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, mask), xv[2 * j]), ones);
        p[2 * j + 1] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask), xv[2 * j + 1]), ones);
      }
      const __m256 sums = _mm256_cvtepi32_ps(_mm256_sub_epi32(reduce(p), off));
      const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc[c] + 8 * b)));
      fa[c] = _mm256_fmadd_ps(sums, s, fa[c]);
    }
  }
  // the last 1-3 chunks: their groups' sums, the scales of the row's groups only (a padding
  // plane past the last group sums to 0 and its scale is not read)
  const index_t rest = chunks - blocks * 4;
  if (rest > 0) {
    const index_t g0 = blocks * 8, ng = 2 * rest;
    alignas(32) std::int32_t offs[8] = {};
    for (index_t i = 0; i < ng; ++i) offs[i] = xoff[g0 + i];
    const __m256i off = _mm256_load_si256(reinterpret_cast<const __m256i*>(offs));
    for (int c = 0; c < C; ++c) {
      __m256i p[8];
      for (int i = 0; i < 8; ++i) p[i] = _mm256_setzero_si256();
      for (index_t j = 0; j < rest; ++j) {
        const index_t ch = blocks * 4 + j;
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c] + ch * 32));
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + ch * 64));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + ch * 64 + 32));
        p[2 * j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v, mask), x0), ones);
        p[2 * j + 1] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask), x1), ones);
      }
      alignas(32) float scl[8] = {};
      for (index_t i = 0; i < ng && g0 + i < groups; ++i) scl[i] = scale_value(sc[c][g0 + i]);
      const __m256 sums = _mm256_cvtepi32_ps(_mm256_sub_epi32(reduce(p), off));
      fa[c] = _mm256_fmadd_ps(sums, _mm256_load_ps(scl), fa[c]);
    }
  }
  for (int c = 0; c < C; ++c) out[0][c] = hsum(fa[c]);
}
#endif

}  // namespace simd256

template <class Scheme, int R, int C, class Isa>
  requires(!std::is_same_v<Isa, isa_portable>)
void qdot(Isa, const std::uint8_t* const* w, const std::int8_t* const* x, index_t chunks, index_t gsub,
          const scale_t<Scheme>* const* sc, index_t groups, float (&out)[R][C], const std::int32_t* const* xoff,
          const std::uint8_t* const* next = nullptr) {
  using namespace simd256;
#if defined(__F16C__) && defined(__FMA__)
  if constexpr (R == 1 && Scheme::bits == 4 && std::is_same_v<Isa, isa_avx2> && std::is_same_v<scale_t<Scheme>, half>) {
    if (gsub == 1) {
      int4_g32_row<C>(w, x[0], chunks, sc, groups, out, xoff[0], next);
      return;
    }
  }
#endif
  constexpr int P = planes<Scheme>;
  constexpr bool direct = signed_codes<Scheme, Isa>;
  const bool grouped = gsub > 0;
  const index_t limit = grouped ? gsub : flush_planes;
  __m256i acc[R][C], init[R];
  __m256 fa[R][C];
  index_t cnt = 0, g = 0;
  // a segment's sums start at -offset * sum(x) over it (in one lane: the lanes are summed
  // in the end, and a segment's lanes share its scale)
  const index_t segs = (chunks * P + limit - 1) / limit;
  const auto start = [&] {
    if (g >= segs) return;  // past the last segment: nothing more to sum
    for (int r = 0; r < R; ++r) {
      init[r] = direct ? _mm256_setzero_si256() : _mm256_setr_epi32(-xoff[r][g], 0, 0, 0, 0, 0, 0, 0);
      for (int c = 0; c < C; ++c) acc[r][c] = init[r];
    }
  };
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) fa[r][c] = _mm256_setzero_ps();
  start();
  const auto flush = [&] {
    for (int c = 0; c < C && !(grouped && g >= groups); ++c) {  // (a segment of padding only: 0)
      const __m256 s = _mm256_set1_ps(grouped ? scale_value(sc[c][g]) : 1.0f);
      for (int r = 0; r < R; ++r) fa[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][c]), s, fa[r][c]);
    }
    cnt = 0;
    ++g;
  };
  const auto plane = [&]<int Pi>(std::integral_constant<int, Pi>, const __m256i* wv, index_t ch) {
    __m256i xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r] + ch * Scheme::chunk + 32 * Pi));
    for (int c = 0; c < C; ++c) {
      const __m256i u = unpack<Scheme, Pi>(wv[c]);
      for (int r = 0; r < R; ++r) {
        if constexpr (direct) acc[r][c] = dot_signed(acc[r][c], u, xv[r]);
        else acc[r][c] = dot<Isa>(acc[r][c], u, xv[r]);
      }
    }
    if (++cnt == limit) {
      flush();
      start();
    }
  };
  for (index_t ch = 0; ch < chunks; ++ch) {
    if (next && !(ch & 1)) {  // the next weight rows' line at this offset, a tile ahead, into the L2
      // (into the L1, the AVX2 decode step at K = 2048 read 8-10 GB/s a Zen 4 core, 16-23 so)
      for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(next[c] + ch * 32), _MM_HINT_T1);
    }
    __m256i wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c] + ch * 32));
    [&]<int... Pi>(std::integer_sequence<int, Pi...>) {
      (plane(std::integral_constant<int, Pi>{}, wv, ch), ...);
    }(std::make_integer_sequence<int, P>{});
  }
  if (cnt) flush();
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = hsum(fa[r][c]);
}
#endif  // __AVX2__

}  // namespace kiln::detail::cpu_quant
