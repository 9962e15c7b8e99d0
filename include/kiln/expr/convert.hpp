// kiln/expr/convert.hpp — scalar conversions between compute types, shared by every
// backend's scalar path (the SIMD and GLSL spellings mirror these rules exactly):
//   float -> integer: truncate toward zero, saturate to the target's range (int32: to
//                     INT32_MAX from 2^31 up), NaN -> 0;
//   integer -> integer: wrap to the target's width (two's complement);
//   float -> f16/bf16: round to the target's precision (nearest even);
//   mask -> number: 1 or 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/core/dtype.hpp"

namespace kiln::detail {

/// Saturation bounds (as float) for converting float to integer dtype To.
template <class To>
constexpr float int_lo() {
  return static_cast<float>(std::numeric_limits<To>::min());
}
template <class To>
constexpr float int_hi() {
  // int32's max is not a float; the largest float below 2^31 is 2147483520
  if constexpr (std::is_same_v<To, std::int32_t>) return 2147483520.0f;
  else return static_cast<float>(std::numeric_limits<To>::max());
}

/// Converts a compute value of dtype From to the compute value of dtype To.
template <class To, class From>
compute_t<To> convert_value(compute_t<From> v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? compute_t<To>(1) : compute_t<To>(0);
  } else if constexpr (is_floating_v<To>) {
    if constexpr (std::is_same_v<To, float>) return static_cast<float>(v);
    else return static_cast<float>(To(static_cast<float>(v)));  // round to f16/bf16 precision
  } else if constexpr (is_floating_v<From>) {
    if (std::isnan(v)) return 0;
    if constexpr (std::is_same_v<To, std::int32_t>) {
      if (v >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();  // not a float: exact here
    }
    const float c = std::fmin(std::fmax(v, int_lo<To>()), int_hi<To>());
    return static_cast<std::int32_t>(static_cast<To>(static_cast<std::int32_t>(c)));
  } else {
    return static_cast<std::int32_t>(static_cast<To>(v));  // wraps (C++20: modular)
  }
}

/// Compute value -> storage value (floating: narrowing rounds to nearest even; integers wrap).
template <class T>
T to_storage(compute_t<T> v) {
  return static_cast<T>(v);
}
template <>
inline std::uint8_t to_storage<std::uint8_t>(std::int32_t v) {
  return static_cast<std::uint8_t>(v);
}

}  // namespace kiln::detail
