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
const auto ref_softplus = [](long double x) { return std::log1p(std::exp(x)); };
}  // namespace

TYPED_TEST(softplus_test, f32) { check_unary<TypeParam>(kiln_softplus, eigen_softplus, transcendental_tol); }

TYPED_TEST(softplus_test, f32_tails) {
  check_unary<TypeParam>(kiln_softplus, eigen_softplus, transcendental_tol, {-80.0f, 500.0f});
}

// In relative error where softplus(x) ~ e^x is small: GLSL has no log1p, and log(1 + t)
// was 4e-4 off at x = -10 and 0 for x <= -17 on Vulkan. Results fall below FLT_MIN at
// x = -87.3.
TYPED_TEST(softplus_test, f32_negative_tail_in_relative_error) {
  check_unary_dense<TypeParam>(kiln_softplus, ref_softplus, -88.0f, -17.0f, tol::transcendental);
  check_unary_dense<TypeParam>(kiln_softplus, ref_softplus, -17.0f, 0.0f, tol::transcendental);
  check_unary_dense<TypeParam>(kiln_softplus, ref_softplus, 0.0f, 90.0f, tol::transcendental);
}

TYPED_TEST(softplus_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_softplus, eigen_softplus, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_softplus, eigen_softplus, bf16_tol);
}
