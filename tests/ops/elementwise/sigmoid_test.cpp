// tests/ops/elementwise/sigmoid_test.cpp — 1 / (1 + e^-x) against Eigen's logistic (double):
// both tails (tiny results stay relatively accurate), sigmoid(-inf) = 0, sigmoid(inf) = 1.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class sigmoid_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(sigmoid_test, backend_types);

namespace {
const auto kiln_sigmoid = [](const auto& x) { return kiln::sigmoid(x); };
const auto eigen_sigmoid = [](const ArrayXd& x) -> ArrayXd { return x.logistic(); };
}  // namespace

TYPED_TEST(sigmoid_test, f32) { check_unary<TypeParam>(kiln_sigmoid, eigen_sigmoid, transcendental_tol); }

TYPED_TEST(sigmoid_test, f32_tails) {
  check_unary<TypeParam>(kiln_sigmoid, eigen_sigmoid, transcendental_tol, {-80.0f, 30.0f});
}

TYPED_TEST(sigmoid_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_sigmoid, eigen_sigmoid, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_sigmoid, eigen_sigmoid, bf16_tol);
}
