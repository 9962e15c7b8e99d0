// tests/ops/elementwise/exp_test.cpp — e^x against Eigen (double): the whole normal float
// range, overflow to inf, subnormal results, underflow to 0, specials, half/bfloat16 operands.
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

// Up to ln(FLT_MAX) = 88.7228 on the CPU, where kiln's exp (exp.hpp) keeps results of
// 2.4e38 .. 3.4e38 finite; up to 88.37 on Vulkan, whose exp is the device's own.
TYPED_TEST(exp_test, f32_whole_normal_range) {
  const float hi = std::is_same_v<TypeParam, kiln_test::cpu> ? 88.722f : 88.37f;
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-87.0f, hi});
}

TYPED_TEST(exp_test, f32_overflow_and_underflow) {
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {88.73f, 200.0f});
  check_unary<TypeParam>(kiln_exp, eigen_exp, transcendental_tol, {-200.0f, -104.0f});
}

TYPED_TEST(exp_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_exp, eigen_exp, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_exp, eigen_exp, bf16_tol);
}

// e^x for x in [-103.97, -87.34] is a subnormal float: kiln's exp applies 2^n in one
// rounding, so results keep to an ulp of the subnormal spacing (2^-149) on the CPU. (GPU
// drivers may flush subnormals; the Vulkan backend is not held to this.)
TEST(exp_cpu, subnormal_results) {
  constexpr double subnormal_ulp = 1.401298464324817e-45;  // 2^-149
  check_unary<kiln_test::cpu>(kiln_exp, eigen_exp, tolerance{tol::transcendental, 2 * subnormal_ulp},
                              {-103.9f, -87.4f});
}
