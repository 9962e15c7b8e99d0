// tests/ops/elementwise/log_test.cpp — natural logarithm against Eigen (double): small and
// large arguments, log 0 = -inf, log of a negative = NaN, specials.
#include <algorithm>
#include <type_traits>

#include "check.hpp"

using namespace kiln_test;

template <class B>
class log_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(log_test, backend_types);

namespace {
const auto kiln_log = [](const auto& x) { return kiln::log(x); };
const auto eigen_log = [](const ArrayXd& x) -> ArrayXd { return x.log(); };
}  // namespace

TYPED_TEST(log_test, f32_near_one) {
  // Vulkan's GLSL log is specified to 2^-21 absolute error in [0.5, 2] (Vulkan spec,
  // "Precision and Operation of SPIR-V Instructions"), not in ulps: near 1 that bound rules.
  tolerance t = transcendental_tol;
  if (!std::is_same_v<TypeParam, kiln_test::cpu>) t.atol = std::max(t.atol, 4.77e-7);
  check_unary<TypeParam>(kiln_log, eigen_log, t, {0.0f, 2.0f});
}

TYPED_TEST(log_test, f32_wide_range) {
  check_unary<TypeParam>(kiln_log, eigen_log, transcendental_tol, {1e-30f, 1e30f});
}

TYPED_TEST(log_test, f32_negative_arguments_give_nan) {
  check_unary<TypeParam>(kiln_log, eigen_log, transcendental_tol, {-4.0f, 4.0f});
}

TYPED_TEST(log_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_log, eigen_log, f16_tol, {0.01f, 100.0f});
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_log, eigen_log, bf16_tol, {0.01f, 100.0f});
}
