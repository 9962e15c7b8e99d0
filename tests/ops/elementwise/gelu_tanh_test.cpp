// tests/ops/elementwise/gelu_tanh_test.cpp — GELU, tanh approximation, against the same
// formula in Eigen (double): x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
// At -inf the formula is -inf * 0: NaN in double too.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class gelu_tanh_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(gelu_tanh_test, backend_types);

namespace {
const auto kiln_gelu_tanh = [](const auto& x) { return kiln::gelu_tanh(x); };
const auto eigen_gelu_tanh = [](const ArrayXd& x) -> ArrayXd {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + (k * (x + 0.044715 * x.cube())).tanh());
};
// for x < 0, 1 + tanh cancels: the float error there is absolute (tol::gelu_tanh_abs)
constexpr tolerance gelu_tol{tol::transcendental, tol::gelu_tanh_abs};
constexpr tolerance gelu_f16_tol{tol::f16, tol::gelu_tanh_abs};
constexpr tolerance gelu_bf16_tol{tol::bf16, tol::gelu_tanh_abs};
}  // namespace

TYPED_TEST(gelu_tanh_test, f32) { check_unary<TypeParam>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_tol); }

TYPED_TEST(gelu_tanh_test, f32_tails) {
  check_unary<TypeParam>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_tol, {-20.0f, 20.0f});
}

TYPED_TEST(gelu_tanh_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_bf16_tol);
}
