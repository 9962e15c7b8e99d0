// kiln/expr/glsl.hpp — helpers for an op's GLSL side (the Vulkan backend compiles it).
//
// An op's `glsl` body is one expression over {0}, {1}, ... (its operands) and {T} (their
// GLSL type). An op that needs helper functions declares them as `glsl_functions`: a
// string (static constexpr std::string_view) or a static function returning a
// std::string or a std::vector<std::string>, one GLSL function definition each. The code
// generator emits every distinct definition once, before the kernel's own code, so two
// ops may share a helper (gelu_tanh and tanh both bring kiln_tanh).
//
// Helpers for fitted approximations print the same float coefficients the SIMD body
// uses, so the two spellings cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/detail/config.hpp"

namespace kiln::detail {

/// A float constant as GLSL source, exact to the last bit ("1.128379159e+00").
KILN_DECL std::string glsl_float(float v);

/// c[0] + c[1] t + ... by Horner's rule, as nested GLSL fma calls over the variable t.
template <std::size_t N>
std::string glsl_horner(const std::array<float, N>& c, std::string_view t) {
  std::string s = glsl_float(c[N - 1]);
  for (std::size_t k = N - 1; k-- > 0;) s = "fma(" + s + ", " + std::string(t) + ", " + glsl_float(c[k]) + ")";
  return s;
}

/// The GLSL function definitions an op declares (none when it declares none).
template <class Op>
std::vector<std::string> glsl_functions_of() {
  if constexpr (requires { Op::glsl_functions(); }) {
    using R = decltype(Op::glsl_functions());
    if constexpr (std::is_convertible_v<R, std::string_view>) return {std::string(std::string_view(Op::glsl_functions()))};
    else return std::vector<std::string>(Op::glsl_functions());
  } else if constexpr (requires { std::string_view(Op::glsl_functions); }) {
    return {std::string(std::string_view(Op::glsl_functions))};
  } else {
    return {};
  }
}

}  // namespace kiln::detail

#if KILN_DEFINE_CPU_RUNTIME
#include "kiln/expr/impl/glsl.ipp"
#endif
