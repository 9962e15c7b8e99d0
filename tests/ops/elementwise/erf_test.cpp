// tests/ops/elementwise/erf_test.cpp — the error function against Eigen (double, erf from
// unsupported/Eigen/SpecialFunctions): near 0, saturation to ±1, erf(±inf) = ±1.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class erf_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(erf_test, backend_types);

namespace {
const auto kiln_erf = [](const auto& x) { return kiln::erf(x); };
const auto eigen_erf = [](const ArrayXd& x) -> ArrayXd { return x.erf(); };
}  // namespace

TYPED_TEST(erf_test, f32) { check_unary<TypeParam>(kiln_erf, eigen_erf, transcendental_tol); }

TYPED_TEST(erf_test, f32_near_zero) { check_unary<TypeParam>(kiln_erf, eigen_erf, transcendental_tol, {-0.01f, 0.01f}); }

TYPED_TEST(erf_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_erf, eigen_erf, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_erf, eigen_erf, bf16_tol);
}
