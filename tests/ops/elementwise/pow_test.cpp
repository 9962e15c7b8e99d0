// tests/ops/elementwise/pow_test.cpp — a^b against Eigen (double, std::pow rules):
// tensor exponents, scalar exponent or base, negative bases with integer exponents, and
// the IEEE special cases (pow(x, 0) = 1, pow(1, y) = 1, pow(-0, -1) = -inf, ...).
#include "check.hpp"

using namespace kiln_test;

template <class B>
class pow_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(pow_test, backend_types);

namespace {
// std::pow per coefficient: the C (Annex F) special cases are the reference
const auto eigen_pow = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd {
  return a.binaryExpr(b, [](double x, double y) { return std::pow(x, y); });
};
}  // namespace

TYPED_TEST(pow_test, f32_tensors) {
  check_binary<TypeParam>([](const auto& a, const auto& b) { return kiln::pow(a, b); }, eigen_pow,
                          transcendental_tol, {0.01f, 4.0f}, {-3.0f, 3.0f});
}

TYPED_TEST(pow_test, f32_scalar_exponent) {
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, 0.5f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), 0.5)); },
                         transcendental_tol, {0.0f, 16.0f});
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, -1.75f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), -1.75)); },
                         transcendental_tol, {0.01f, 16.0f});
}

TYPED_TEST(pow_test, f32_large_exponent_near_one) {
  // e^(y log x): an absolute error of log near 1 (GLSL's builtin log2 is held to no more)
  // becomes y times that in relative error of the result; kiln's log keeps it relative
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, 30.0f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), 30.0)); },
                         transcendental_tol, {0.9f, 1.1f, false});
}

TYPED_TEST(pow_test, f32_negative_base_with_integer_exponent) {
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, 3.0f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), 3.0)); },
                         transcendental_tol);
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, -2.0f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), -2.0)); },
                         transcendental_tol);
  // odd and negative: pow(-0, -1) = -inf, pow(-inf, -1) = -0
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, -1.0f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), -1.0)); },
                         transcendental_tol);
}

TYPED_TEST(pow_test, f32_negative_base_with_fractional_exponent_is_nan) {
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(x, 0.5f); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(x, ArrayXd::Constant(x.size(), 0.5)); },
                         transcendental_tol, {-4.0f, 0.0f});
}

TYPED_TEST(pow_test, f32_scalar_base) {
  check_unary<TypeParam>([](const auto& x) { return kiln::pow(2.0f, x); },
                         [](const ArrayXd& x) -> ArrayXd { return eigen_pow(ArrayXd::Constant(x.size(), 2.0), x); },
                         transcendental_tol, {-20.0f, 20.0f});
}

TYPED_TEST(pow_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return kiln::pow(a, b); };
  check_binary_lowp<TypeParam, kiln::half>(f, eigen_pow, f16_tol, {0.1f, 4.0f}, {-2.0f, 2.0f});
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, eigen_pow, bf16_tol, {0.1f, 4.0f}, {-2.0f, 2.0f});
}
