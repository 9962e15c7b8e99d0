// tests/ops/elementwise/log_test.cpp — natural logarithm against Eigen (double): small and
// large arguments, log 0 = -inf, log of a negative = NaN, specials.
#include <algorithm>
#include <cmath>
#include <vector>
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
  check_unary<TypeParam>(kiln_log, eigen_log, transcendental_tol, {0.0f, 2.0f});
}

TYPED_TEST(log_test, relative_error_near_one_is_a_few_ulp) {
  // GLSL's builtin log promises only 2^-21 absolute error in [0.5, 2]: 1e-4 relative near
  // log(1 + 2.6e-4) on an NVIDIA GPU. kiln's GLSL log (and xsimd's) keep relative error:
  // 4 ulp allowed, over every 1 + i 2^-23 near 1 and dense steps across [0.5, 2].
  const auto ref = [](long double x) { return std::log(x); };
  std::vector<float> near;
  for (int i = -4096; i <= 4096; ++i) near.push_back(1.0f + float(i) * 0x1p-23f);
  const auto got = eval<float, TypeParam>(kiln_log, near);
  for (std::size_t i = 0; i < near.size(); ++i) {
    const double want = double(ref(static_cast<long double>(near[i])));
    if (want == 0.0) {
      EXPECT_EQ(got[i], 0.0f) << near[i];
    } else {
      EXPECT_LE(std::abs(double(got[i]) - want), 5e-7 * std::abs(want)) << "x = " << near[i] << " got " << got[i];
    }
  }
  check_unary_dense<TypeParam>(kiln_log, ref, 0.5f, 2.0f, 5e-7);
  check_unary_dense<TypeParam>(kiln_log, ref, 2.0f, 1e6f, 5e-7, 100003);
}

TYPED_TEST(log_test, subnormal_and_extreme_arguments) {
  // subnormals where the device keeps them (lavapipe does; a device flushing them reads 0)
  const std::vector<float> x = {1e-45f, 3e-42f, 1e-39f, 1.1754942e-38f, 1.17549435e-38f, 3.4028235e38f,
                                0x1p-126f, 0x1p127f, 0.70710677f, 0.70710683f, 1.4142135f, 1.4142137f};
  const auto got = eval<float, TypeParam>(kiln_log, x);
  const bool flushes = flushes_subnormals<TypeParam>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (flushes && x[i] < std::numeric_limits<float>::min()) {
      EXPECT_EQ(got[i], -std::numeric_limits<float>::infinity()) << "x = " << x[i] << " read as 0";
      continue;
    }
    const double want = std::log(double(x[i]));
    EXPECT_LE(std::abs(double(got[i]) - want), 5e-7 * std::abs(want)) << "x = " << x[i] << " got " << got[i];
  }
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
