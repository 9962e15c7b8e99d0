// tests/ops/elementwise/rsqrt_test.cpp — 1 / sqrt(x) against Eigen (double): a divide of a
// correctly rounded sqrt (not the hardware estimate), rsqrt(0) = inf, rsqrt(-0) = -inf,
// rsqrt(inf) = 0, negatives give NaN.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class rsqrt_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(rsqrt_test, backend_types);

namespace {
const auto kiln_rsqrt = [](const auto& x) { return kiln::rsqrt(x); };
const auto eigen_rsqrt = [](const ArrayXd& x) -> ArrayXd { return x.rsqrt(); };
}  // namespace

TYPED_TEST(rsqrt_test, f32) { check_unary<TypeParam>(kiln_rsqrt, eigen_rsqrt, exact_tol, {1e-6f, 100.0f}); }

TYPED_TEST(rsqrt_test, f32_wide_range) {
  check_unary<TypeParam>(kiln_rsqrt, eigen_rsqrt, exact_tol, {1e-30f, 3e38f});
}

TYPED_TEST(rsqrt_test, f32_negative_arguments_give_nan) {
  check_unary<TypeParam>(kiln_rsqrt, eigen_rsqrt, exact_tol, {-4.0f, 4.0f});
}

TYPED_TEST(rsqrt_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_rsqrt, eigen_rsqrt, f16_tol, {0.01f, 100.0f});
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_rsqrt, eigen_rsqrt, bf16_tol, {0.01f, 100.0f});
}
