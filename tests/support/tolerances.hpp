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
// GELU's erf form cancels for x < -3 (1 + erf(x/sqrt 2) -> 0): absolute error up to ~1e-6
// there, from erf's few-ulp error near -1 (even a correctly rounded float erf gives ~2e-7).
// Measured over every float in [-8, 8] (beyond rtol = transcendental): worst 9.8e-7 with
// AVX-512, 1.03e-6 with AVX2+FMA (at x = -5.08), hence 1.5e-6 rather than 1e-6.
inline constexpr double gelu_abs = 1.5e-6;
// gelu_tanh cancels the same way in 1 + tanh(u), and kiln's rational tanh (tanh.hpp, up to
// 4.4e-7 relative) is off by up to ~4 ulp(1) near -1, even just below -1: |x|/2 times that
// reaches 1.2e-6 around x = -4.95 (every float in [-8, 8], AVX-512 and AVX2; seen in a test:
// gelu_tanh = +9e-7 where the oracle says -8e-8).
inline constexpr double gelu_tanh_abs = 2e-6;
inline constexpr double f16 = 1.0e-3;            // 2^-11 relative rounding, plus float work
// Results below 2^-14 (f16's smallest normal) are subnormal, spaced 2^-24 apart: rounding
// there is absolute (up to 2^-25), so f16 needs an absolute floor next to its relative bound.
inline constexpr double f16_abs = 6e-8;          // 2^-24
inline constexpr double bf16 = 8.0e-3;           // 2^-8 relative rounding, plus float work

}  // namespace kiln_test::tol
