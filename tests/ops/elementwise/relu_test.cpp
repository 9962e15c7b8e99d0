// tests/ops/elementwise/relu_test.cpp — max(x, 0) against Eigen: NaN stays NaN, integers
// of every dtype, half/bfloat16 operands.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class relu_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(relu_test, backend_types);

namespace {
const auto kiln_relu = [](const auto& x) { return kiln::relu(x); };
// NaN propagates (Eigen's own max leaves NaN handling unspecified, so say it explicitly)
const auto eigen_relu = [](const ArrayXd& x) -> ArrayXd {
  return x.isNaN().select(x, x.max(0.0));
};
}  // namespace

TYPED_TEST(relu_test, f32) { check_unary<TypeParam>(kiln_relu, eigen_relu, exact_tol); }

TYPED_TEST(relu_test, integers) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_unary<TypeParam, T>(kiln_relu, [](const ArrayXl& x) -> ArrayXl { return x.max(std::int64_t(0)); });
  });
}

TYPED_TEST(relu_test, half_and_bfloat16_operands) {
  check_unary_lowp<TypeParam, kiln::half>(kiln_relu, eigen_relu, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(kiln_relu, eigen_relu, bf16_tol);
}
