// kiln/vulkan/codegen/types.hpp — GLSL spellings of kiln's dtypes (storage types, compute
// types, loads and stores with their conversions) and the helper snippets generated
// kernels declare when they need them (bf16 rounding, the wide variant's bit casts,
// texel reads, saturating float -> int).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "kiln/core/dtype.hpp"
#include "kiln/detail/config.hpp"

namespace kiln::detail::vk {

KILN_DECL std::string_view glsl_storage_type(dtype t);

/// GLSL type a stored dtype computes in.
constexpr std::string_view compute_type_of(dtype t) {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16 ? "float" : "int";
}

template <class T>
constexpr std::string_view glsl_compute_type() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (is_floating_v<T>) return "float";
  else return "int";
}

/// GLSL expression converting a stored value (text `x`) of dtype t to its compute type.
KILN_DECL std::string glsl_load(dtype t, const std::string& x);

/// GLSL expression converting compute value `v` (of GLSL type `from`) to dtype t's storage.
KILN_DECL std::string glsl_store(dtype t, std::string_view from, const std::string& v);

inline constexpr std::string_view bf16_glsl = R"(uint kiln_to_bf16(float v) {
  uint x = floatBitsToUint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
)";

/// A float rounded to the nearest f16 value (ties to even; past 65504 to inf; f16
/// subnormals as multiples of 2^-24; NaN kept), as a float: what a cast to half computes
/// inside an expression. Integer arithmetic, not unpackHalf2x16(packHalf2x16(x)), which a
/// driver may fold to x (NVIDIA's does).
inline constexpr std::string_view f16_round_glsl = R"(float kiln_round_f16(float v) {
  uint x = floatBitsToUint(v), s = x & 0x80000000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return v;
  if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);
  if (a < 0x38800000u) return uintBitsToFloat(s | floatBitsToUint(roundEven(uintBitsToFloat(a) * 16777216.0) * 5.9604644775390625e-8));
  return uintBitsToFloat(s | ((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u));
}
)";

/// The wide variant's bit casts: a u64vec2 (from a u64vec4 load) <-> four 32-bit lanes.
inline constexpr std::string_view wide_glsl = R"(vec4 kiln_f32x4(u64vec2 w) { return uintBitsToFloat(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
ivec4 kiln_i32x4(u64vec2 w) { return ivec4(uvec4(unpackUint2x32(w.x), unpackUint2x32(w.y))); }
u64vec2 kiln_pack_f32x4(vec4 v) { uvec4 u = floatBitsToUint(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
u64vec2 kiln_pack_i32x4(ivec4 v) { uvec4 u = uvec4(v); return u64vec2(packUint2x32(u.xy), packUint2x32(u.zw)); }
)";

/// Texel reads: element e of a texel-read binding (four 32-bit elements a texel).
inline constexpr std::string_view texel_glsl = R"(uint kiln_texel(usamplerBuffer t, uint e) { return texelFetch(t, int(e >> 2u))[e & 3u]; }
)";

/// Saturating float -> integer (truncate toward zero; NaN -> 0), as detail::convert_value.
inline constexpr std::string_view f2i_glsl = R"(int kiln_f2i(float v, float lo, float hi) {
  if (isnan(v)) return 0;
  if (hi > 2147483000.0 && v >= 2147483648.0) return 2147483647;  // int32: its max is not a float
  return int(clamp(v, lo, hi));
}
)";

}  // namespace kiln::detail::vk

#if KILN_DEFINE_VULKAN_RUNTIME
#include "kiln/vulkan/codegen/impl/types.ipp"
#endif
