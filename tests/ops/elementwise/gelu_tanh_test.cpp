// tests/ops/elementwise/gelu_tanh_test.cpp — GELU, tanh approximation, against the same
// formula in double, x/2 * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3), written as
// x / (1 + e^(-2u)), its value without 1 + tanh's cancellation for x < 0. Held in
// relative error on both sides, dense over the negative tail down to where results
// underflow. At -inf the formula is -inf * 0: NaN in double too.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class gelu_tanh_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(gelu_tanh_test, backend_types);

namespace {
const auto kiln_gelu_tanh = [](const auto& x) { return kiln::gelu_tanh(x); };
const auto ref_gelu_tanh = [](long double x) {
  const long double u = std::sqrt(2.0L / 3.14159265358979323846264338L) * (x + 0.044715L * x * x * x);
  return u < 0 ? x * std::exp(2 * u) / (1 + std::exp(2 * u)) : x / (1 + std::exp(-2 * u));
};
const auto eigen_gelu_tanh = [](const ArrayXd& x) -> ArrayXd {
  return x.unaryExpr([](double v) {
    if (std::isnan(v) || std::isinf(v)) return 0.5 * v * (1.0 + std::tanh(v));  // inf, or -inf * 0 = NaN
    return static_cast<double>(ref_gelu_tanh(v));
  });
};
constexpr tolerance gelu_tanh_tol{tol::transcendental, tol::transcendental_abs};
}  // namespace

TYPED_TEST(gelu_tanh_test, f32) { check_unary<TypeParam>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_tanh_tol); }

TYPED_TEST(gelu_tanh_test, f32_tails) {
  check_unary<TypeParam>(kiln_gelu_tanh, eigen_gelu_tanh, gelu_tanh_tol, {-20.0f, 20.0f});
}

// Where 1 + tanh cancelled: relative error was up to 9 near x = -5.2 (absolute ~1e-6).
// Results fall below FLT_MIN near x = -10.1 and round to 0 near x = -10.5.
TYPED_TEST(gelu_tanh_test, f32_negative_tail_in_relative_error) {
  check_unary_dense<TypeParam>(kiln_gelu_tanh, ref_gelu_tanh, -11.0f, 0.0f, tol::gelu_tanh);
  check_unary_dense<TypeParam>(kiln_gelu_tanh, ref_gelu_tanh, -6.0f, 0.0f, tol::gelu_tanh_to_6);
  check_unary_dense<TypeParam>(kiln_gelu_tanh, ref_gelu_tanh, 0.0f, 12.0f, tol::transcendental);
}

TYPED_TEST(gelu_tanh_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_gelu_tanh, eigen_gelu_tanh, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_gelu_tanh, eigen_gelu_tanh, bf16_tol);
}
