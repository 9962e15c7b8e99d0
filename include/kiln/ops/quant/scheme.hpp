// kiln/ops/quant/scheme.hpp — the quantization schemes and their storage format, shared
// by the front end (ops/quant/) and every backend's kernels (cpu/quant/,
// kernels/quant/*.comp), which must agree on it bit for bit.
//
// A quantized [N, K] weight (the layout of an nn.Linear weight) is stored as
//   codes  int32 [N, W]: each row's codes as bytes, in chunks of 32 bytes, W = chunks * 8
//          (little-endian bytes of the int32 words; the int32 dtype only lets every
//          backend hold them without 8-bit storage). A stored code is unsigned: the
//          signed code plus the scheme's offset, so a padded position (code = offset)
//          is worth 0.
//   scales [N, G] of the scheme's scale_type: one per group of `group` weights along K
//          (G = K / group); one per row is G = 1; one per tensor (ternary's default) is
//          [1, 1]. int8 and ternary keep them as float; int4 as f16 (kiln::half), as
//          GGUF's Q4_0 does: with a scale per 32 weights, f32 scales were a fifth of the
//          bytes a decode step streams (0.625 bytes a weight against 0.5625).
// The value of weight (n, k) is (stored code - offset) * scale.
//
// Byte j (0..31) of chunk c of a row holds:
//   int8     8 bits: weight 32c + j                         (offset 128, codes -127..127)
//   int4     low nibble weight 64c + j, high nibble 64c + 32 + j   (offset 8, codes -7..7)
//   ternary  bits 2s, 2s+1 (s = 0..3): weight 128c + 32s + j  (offset 1, codes -1, 0, 1)
// so unpacking a 32-byte vector with shifts and one mask gives 32 consecutive weights per
// shift on any SIMD width.
//
// Quantizing (round half to even, as torch.round):
//   int8, int4  symmetric absmax per group: scale = max|w| / qmax (qmax 127, 7),
//               code = clamp(round(w * (qmax / max|w|)), -qmax, qmax); an all-zero group
//               has scale 0 and codes 0. int4 stores the scale rounded to f16 (to
//               nearest even; the codes are those of the float scale): a relative
//               change of at most 2^-11, under a 4-bit code's own error by far. A group
//               whose max|w| / 7 passes f16's range (65504) throws kiln::value_error; one
//               below 2^-14 keeps an f16 subnormal scale (2^-24 steps).
//   ternary     BitNet b1.58 absmean: gamma = mean(|w|) over the tensor (or each row),
//               code = clamp(round(w * (1 / (gamma + eps))), -1, 1), scale = gamma.
// (Multiplying by a reciprocal computed once per group, not dividing per weight: both
// backends then round exactly the same, since a GPU's division need not be exact.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/core/half.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {
namespace quant {

/// 8-bit codes, symmetric absmax, one scale per row (group 0) or per group of 32, 64 or
/// 128 weights along K.
struct int8 {
  static constexpr std::string_view name = "int8";
  static constexpr int bits = 8;
  static constexpr int offset = 128;
  static constexpr int qmax = 127;
  static constexpr int chunk = 32;          // weights per 32-byte chunk
  static constexpr int default_group = 0;   // per row
  using scale_type = float;
};

/// 4-bit codes (two per byte), symmetric absmax per group of 32, 64 or 128 weights.
struct int4 {
  static constexpr std::string_view name = "int4";
  static constexpr int bits = 4;
  static constexpr int offset = 8;
  static constexpr int qmax = 7;
  static constexpr int chunk = 64;
  static constexpr int default_group = 32;
  using scale_type = half;  // f16, as GGUF's Q4_0
};

/// BitNet b1.58 ternary codes (-1, 0, 1; four per byte), absmean scale per tensor (or
/// per row with quant_options::per_row).
struct ternary {
  static constexpr std::string_view name = "ternary";
  static constexpr int bits = 2;
  static constexpr int offset = 1;
  static constexpr int qmax = 1;
  static constexpr int chunk = 128;
  static constexpr int default_group = 0;
  using scale_type = float;
};

}  // namespace quant

/// A quantization scheme: kiln::quant::int8, int4 or ternary.
template <class S>
concept quant_scheme = std::is_same_v<S, quant::int8> || std::is_same_v<S, quant::int4> || std::is_same_v<S, quant::ternary>;

/// Options of kiln::quantize.
struct quant_options {
  /// Weights per scale along K: int8 0 (per row, the default), 32, 64 or 128; int4 32 (the
  /// default), 64 or 128; K must be a multiple of it. Ternary ignores it.
  int group = -1;
  /// Ternary: one scale per row instead of one for the tensor.
  bool per_row = false;
  /// Ternary: added to gamma before dividing, as BitNet does.
  float eps = 1e-5f;
};

namespace detail {

/// The storage geometry of a quantized [N, K] weight (see the top of this file).
struct quant_layout {
  index_t N = 0, K = 0;
  index_t group = 0;       // weights per scale; K for one per row (or per tensor)
  index_t groups = 1;      // scales per row
  bool per_tensor = false; // one scale for every row ([1, 1])
  index_t chunks = 0;      // 32-byte chunks per row
  index_t words = 0;       // int32 words per row (chunks * 8)
  index_t scale_row_stride() const noexcept { return per_tensor ? 0 : groups; }
};

template <class S>
constexpr index_t chunks_for(index_t K) noexcept {
  return (K + S::chunk - 1) / S::chunk;
}

}  // namespace detail
}  // namespace kiln
