// tests/ops/elementwise/sqrt_test.cpp — square root against Eigen (double): correctly
// rounded, sqrt(-0) = -0, negatives give NaN, specials.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class sqrt_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(sqrt_test, backend_types);

namespace {
const auto kiln_sqrt = [](const auto& x) { return kiln::sqrt(x); };
// per coefficient: Eigen 3.4.0's vectorized AVX-512 double sqrt (EIGEN_FAST_MATH, the
// default) gives NaN for +inf, so the packet path cannot be the oracle
const auto eigen_sqrt = [](const ArrayXd& x) -> ArrayXd {
  return x.unaryExpr([](double v) { return std::sqrt(v); });
};
}  // namespace

TYPED_TEST(sqrt_test, f32) { check_unary<TypeParam>(kiln_sqrt, eigen_sqrt, exact_tol, {0.0f, 100.0f}); }

TYPED_TEST(sqrt_test, f32_wide_range) { check_unary<TypeParam>(kiln_sqrt, eigen_sqrt, exact_tol, {0.0f, 3e38f}); }

TYPED_TEST(sqrt_test, f32_negative_arguments_give_nan) {
  check_unary<TypeParam>(kiln_sqrt, eigen_sqrt, exact_tol, {-4.0f, 4.0f});
}

TYPED_TEST(sqrt_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_sqrt, eigen_sqrt, f16_tol, {0.0f, 100.0f});
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_sqrt, eigen_sqrt, bf16_tol, {0.0f, 100.0f});
}
