// tests/ops/elementwise/leaky_relu_test.cpp — x for x >= 0, alpha * x below, against Eigen:
// the default alpha, other alphas (a run-time scalar), NaN stays NaN, half/bfloat16.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class leaky_relu_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(leaky_relu_test, backend_types);

namespace {
ArrayXd eigen_leaky_relu(const ArrayXd& x, float alpha) {
  return (x < 0.0).select(double(alpha) * x, x);  // NaN < 0 is false: NaN passes through
}
}  // namespace

TYPED_TEST(leaky_relu_test, f32_default_alpha) {
  check_unary<TypeParam>([](const auto& x) { return kiln::leaky_relu(x); },
                         [](const ArrayXd& x) { return eigen_leaky_relu(x, 0.01f); }, exact_tol);
}

TYPED_TEST(leaky_relu_test, f32_alphas) {
  for (float alpha : {0.2f, 0.0f, 1.0f, -0.5f}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    check_unary<TypeParam>([alpha](const auto& x) { return kiln::leaky_relu(x, alpha); },
                           [alpha](const ArrayXd& x) { return eigen_leaky_relu(x, alpha); }, exact_tol);
  }
}

TYPED_TEST(leaky_relu_test, half_and_bfloat16_operands) {
  auto f = [](const auto& x) { return kiln::leaky_relu(x, 0.1f); };
  auto o = [](const ArrayXd& x) { return eigen_leaky_relu(x, 0.1f); };
  check_unary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
