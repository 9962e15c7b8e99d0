// tests/support/tolerances.hpp — per-op relative tolerances against the float64 oracle.
// Exact IEEE ops (add, mul, div, sqrt, ...) get a couple of ulps; transcendental
// approximations (xsimd's exp/log/erf/tanh polynomials) a few more; f16/bf16 results are
// held to their own rounding (half an ulp of the storage type, plus the float work).
#pragma once

namespace kiln_test::tol {

inline constexpr double exact = 2.5e-7;          // correctly rounded float ops: 2 ulp
inline constexpr double elementwise = 1e-6;      // short chains of exact ops
inline constexpr double transcendental = 4e-6;   // exp, log, tanh, erf, pow, sigmoid...
inline constexpr double transcendental_abs = 1e-7;  // near zeros of the function (e.g. tanh(0))
// GELU's erf form cancels for x < -3 (1 + erf(x/sqrt 2) -> 0): absolute error up to ~1e-6
// there, from erf's few-ulp error near -1 (even a correctly rounded float erf gives ~2e-7).
inline constexpr double gelu_abs = 1e-6;
inline constexpr double f16 = 1.0e-3;            // 2^-11 relative rounding, plus float work
inline constexpr double bf16 = 8.0e-3;           // 2^-8 relative rounding, plus float work

}  // namespace kiln_test::tol
