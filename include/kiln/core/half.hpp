// kiln/core/half.hpp — kiln::half, IEEE 754 binary16 storage type.
// Arithmetic happens in float: a half converts implicitly to and from float with
// round-to-nearest-even, subnormals, infinities and NaN handled exactly.
#pragma once

#include <bit>      // std::bit_cast
#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>  // _cvtss_sh / _cvtsh_ss (hardware conversion when the build allows it)
#endif

namespace kiln {
namespace detail {

/// float -> binary16 bits, round to nearest even; NaN stays NaN (quiet, payload top bits kept).
constexpr std::uint16_t half_bits_from_float_soft(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(
        sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  const std::uint32_t e = ax >> 23;
  if (e < 113) {  // below 2^-14: half subnormal or zero
    if (e < 102) return static_cast<std::uint16_t>(sign);  // < 2^-25 (or == 2^-25: tie to 0)
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu);
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<std::uint16_t>(sign | h);
}

/// binary16 bits -> float (exact; signalling NaNs come back quiet, as F16C does).
constexpr float half_bits_to_float_soft(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return std::bit_cast<float>(sign);
    // subnormal: m * 2^-24, exact in float
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (e == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  }
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

inline std::uint16_t half_bits_from_float(float f) noexcept {
#if defined(__F16C__)
  return static_cast<std::uint16_t>(_cvtss_sh(f, 0));  // 0 = round to nearest even
#else
  return half_bits_from_float_soft(f);
#endif
}

inline float half_bits_to_float(std::uint16_t h) noexcept {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return half_bits_to_float_soft(h);
#endif
}

}  // namespace detail

/// IEEE 754 binary16. Converts implicitly to and from float (round to nearest even).
/// Example: `kiln::half h = 1.5f; float f = h;`
struct half {
  std::uint16_t bits = 0;

  constexpr half() noexcept = default;
  half(float f) noexcept : bits(detail::half_bits_from_float(f)) {}  // NOLINT: implicit like float
  operator float() const noexcept { return detail::half_bits_to_float(bits); }

  static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits = b;
    return h;
  }
  friend constexpr bool same_bits(half a, half b) noexcept { return a.bits == b.bits; }
};

}  // namespace kiln
