// kiln/core/dtype.hpp — element types kiln stores, and the type each computes in.
// Floating dtypes (f32, f16, bf16) compute in float; integer dtypes (i8, u8, i32)
// compute in int32 and wrap on store, as C++ integer conversion does; masks are bool.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "kiln/core/bfloat16.hpp"
#include "kiln/core/half.hpp"

namespace kiln {

/// Run-time tag of an element type.
enum class dtype : std::uint8_t { f32, f16, bf16, i8, i32, u8, mask };

template <class T>
struct dtype_traits;  // undefined: not a kiln dtype

#define KILN_DTYPE(T, code, short_name, Compute, floating)                   \
  template <>                                                                \
  struct dtype_traits<T> {                                                   \
    static constexpr kiln::dtype value = kiln::dtype::code;                  \
    static constexpr std::string_view name = short_name;                     \
    using compute_type = Compute;                                            \
    static constexpr bool is_floating = floating;                            \
  };
KILN_DTYPE(float, f32, "f32", float, true)
KILN_DTYPE(half, f16, "f16", float, true)
KILN_DTYPE(bfloat16, bf16, "bf16", float, true)
KILN_DTYPE(std::int8_t, i8, "i8", std::int32_t, false)
KILN_DTYPE(std::int32_t, i32, "i32", std::int32_t, false)
KILN_DTYPE(std::uint8_t, u8, "u8", std::int32_t, false)
KILN_DTYPE(bool, mask, "mask", bool, false)  // expression results only; stored as u8
#undef KILN_DTYPE

/// A type kiln can store in a tensor.
template <class T>
concept element = requires { dtype_traits<T>::value; } && !std::is_same_v<T, bool>;

/// A type an expression can yield: a storable element, or bool for masks.
template <class T>
concept value = requires { dtype_traits<T>::value; };

template <value T>
using compute_t = typename dtype_traits<T>::compute_type;

template <value T>
inline constexpr bool is_floating_v = dtype_traits<T>::is_floating;

template <value T>
inline constexpr std::string_view dtype_name_v = dtype_traits<T>::name;

constexpr std::string_view name(dtype d) noexcept {
  switch (d) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::i8: return "i8";
    case dtype::i32: return "i32";
    case dtype::u8: return "u8";
    case dtype::mask: return "mask";
  }
  return "?";
}

constexpr std::size_t size_of(dtype d) noexcept {
  switch (d) {
    case dtype::f32:
    case dtype::i32: return 4;
    case dtype::f16:
    case dtype::bf16: return 2;
    default: return 1;
  }
}

}  // namespace kiln
