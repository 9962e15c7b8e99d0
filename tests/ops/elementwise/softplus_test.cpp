// tests/ops/elementwise/softplus_test.cpp — log(1 + e^x) against Eigen (double, the naive
// formula, which double evaluates exactly enough over these ranges): large x gives x,
// very negative x gives e^x, softplus(inf) = inf, softplus(-inf) = 0.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class softplus_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(softplus_test, backend_types);

namespace {
const auto kiln_softplus = [](const auto& x) { return kiln::softplus(x); };
const auto eigen_softplus = [](const ArrayXd& x) -> ArrayXd { return x.exp().log1p(); };
}  // namespace

TYPED_TEST(softplus_test, f32) { check_unary<TypeParam>(kiln_softplus, eigen_softplus, transcendental_tol); }

TYPED_TEST(softplus_test, f32_tails) {
  check_unary<TypeParam>(kiln_softplus, eigen_softplus, transcendental_tol, {-80.0f, 500.0f});
}

TYPED_TEST(softplus_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_softplus, eigen_softplus, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_softplus, eigen_softplus, bf16_tol);
}
