// tests/support/tolerances.hpp — per-op relative tolerances against the float64 oracle.
// Exact IEEE ops (add, mul, div, sqrt, ...) get a couple of ulps; transcendental
// approximations (kiln's exp/erf/tanh, xsimd's log/log1p/pow) a few more; f16/bf16 results are
// held to their own rounding (half an ulp of the storage type, plus the float work).
#pragma once

namespace kiln_test::tol {

inline constexpr double exact = 2.5e-7;          // correctly rounded float ops: 2 ulp
inline constexpr double elementwise = 1e-6;      // short chains of exact ops
inline constexpr double transcendental = 4e-6;   // exp, log, tanh, erf, pow, sigmoid...
inline constexpr double transcendental_abs = 1e-7;  // near zeros of the function (e.g. tanh(0))
// gelu and gelu_tanh (ops/elementwise/gelu.hpp, gelu_tanh.hpp) never form 1 + erf or
// 1 + tanh, so they are held in relative error down to FLT_MIN (check_unary_dense: below,
// within FLT_MIN). gelu: e^(-x^2/2) times a fitted factor, x^2 carried exactly: worst
// 4.4e-7 over dense x in [-15, 10] on the CPU (AVX2+FMA). Found 1e-6 for both backends.
inline constexpr double gelu = 1e-6;
// gelu_tanh: e^(-2|u|) with u a cubic in x whose float rounding (and that of its
// coefficients) is a relative error of u; the result's relative error is |2u| times that:
// ~2e-6 for x in [-6, 0], growing to 1.35e-5 near x = -10.09, where |2u| reaches 89 and the
// result FLT_MIN (CPU, AVX2+FMA).
inline constexpr double gelu_tanh = 2e-5;
// gelu_tanh on [-6, 0]: |2u| <= 25 there, times up to four float roundings of u (2^-24
// each): 6e-6. Measured 3.3e-6 on an H200, 4.03e-6 on lavapipe with the float controls
// kernels declare (SignedZeroInfNanPreserve), under 4e-6 before.
inline constexpr double gelu_tanh_to_6 = 6e-6;
// a statement that feeds gelu a rounded sum (a * b + c, maybe contracted into one FMA):
// the input's rounding moves gelu by up to |gelu'(x)| ulp(x), an absolute error
inline constexpr double gelu_abs = 1.5e-6;
inline constexpr double f16 = 1.0e-3;            // 2^-11 relative rounding, plus float work
// Results below 2^-14 (f16's smallest normal) are subnormal, spaced 2^-24 apart: rounding
// there is absolute (up to 2^-25), so f16 needs an absolute floor next to its relative bound.
inline constexpr double f16_abs = 6e-8;          // 2^-24
inline constexpr double bf16 = 8.0e-3;           // 2^-8 relative rounding, plus float work

}  // namespace kiln_test::tol
