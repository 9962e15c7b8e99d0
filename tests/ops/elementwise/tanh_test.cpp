// tests/ops/elementwise/tanh_test.cpp — hyperbolic tangent against Eigen (double):
// around 0 (relative accuracy), saturation to ±1, specials.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class tanh_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(tanh_test, backend_types);

namespace {
const auto kiln_tanh = [](const auto& x) { return kiln::tanh(x); };
const auto eigen_tanh = [](const ArrayXd& x) -> ArrayXd { return x.tanh(); };
}  // namespace

TYPED_TEST(tanh_test, f32) { check_unary<TypeParam>(kiln_tanh, eigen_tanh, transcendental_tol); }

TYPED_TEST(tanh_test, f32_near_zero) {
  check_unary<TypeParam>(kiln_tanh, eigen_tanh, transcendental_tol, {-0.01f, 0.01f});
}

TYPED_TEST(tanh_test, f32_saturates) { check_unary<TypeParam>(kiln_tanh, eigen_tanh, transcendental_tol, {-50.0f, 50.0f}); }

TYPED_TEST(tanh_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_tanh, eigen_tanh, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_tanh, eigen_tanh, bf16_tol);
}
