// tests/ops/elementwise/exp_test.cpp — e^x against Eigen (double): the whole normal float
// range, overflow to inf, underflow to 0, specials, half/bfloat16 operands.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class exp_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(exp_test, backend_types);

namespace {
const auto kiln_exp = [](const auto& x) { return kiln::exp(x); };
// rounded to float, so that results beyond float's range meet the inf (or 0) kiln stores
const auto eigen_exp = [](const ArrayXd& x) -> ArrayXd { return x.exp().cast<float>().cast<double>(); };
}  // namespace

TYPED_TEST(exp_test, f32) { check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol); }

// Up to 88.37 only: xsimd's float exp returns inf from 88.3763 on (its overflow threshold),
// although e^x stays below FLT_MAX up to 88.7228; results there (2.4e38 .. 3.4e38) are lost.
TYPED_TEST(exp_test, f32_whole_normal_range) {
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-87.0f, 88.37f});
}

TYPED_TEST(exp_test, f32_overflow_and_underflow) {
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {88.73f, 200.0f});
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-200.0f, -104.0f});
}

TYPED_TEST(exp_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_exp, eigen_exp, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_exp, eigen_exp, bf16_tol);
}
