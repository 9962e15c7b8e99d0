// tests/ops/elementwise/log_test.cpp — natural logarithm against Eigen (double): small and
// large arguments, log 0 = -inf, log of a negative = NaN, specials.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class log_test : public ::testing::Test {};
TYPED_TEST_SUITE(log_test, backend_types);

namespace {
const auto kiln_log = [](const auto& x) { return kiln::log(x); };
const auto eigen_log = [](const ArrayXd& x) -> ArrayXd { return x.log(); };
}  // namespace

TYPED_TEST(log_test, f32_near_one) { check_unary<TypeParam>(kiln_log, eigen_log, transcendental_tol, {0.0f, 2.0f}); }

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
