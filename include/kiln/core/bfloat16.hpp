// kiln/core/bfloat16.hpp — kiln::bfloat16, the top 16 bits of an IEEE float.
// Arithmetic happens in float; conversion from float rounds to nearest even and keeps
// NaN a (quiet) NaN.
#pragma once

#include <bit>      // std::bit_cast
#include <cstdint>

namespace kiln {
namespace detail {

constexpr std::uint16_t bf16_bits_from_float(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

/// bfloat16 (8-bit exponent, 7-bit mantissa). Converts implicitly to and from float.
/// Example: `kiln::bfloat16 b = 3.0f; float f = b;`
struct bfloat16 {
  std::uint16_t bits = 0;

  constexpr bfloat16() noexcept = default;
  constexpr bfloat16(float f) noexcept : bits(detail::bf16_bits_from_float(f)) {}  // NOLINT
  constexpr operator float() const noexcept { return detail::bf16_bits_to_float(bits); }

  static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};

}  // namespace kiln
