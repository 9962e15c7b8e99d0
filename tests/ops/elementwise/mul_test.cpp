// tests/ops/elementwise/mul_test.cpp — a * b against Eigen: floats (0 * inf = NaN ...),
// integers (wrapping), scalars on either side, half/bfloat16 operands.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class mul_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(mul_test, backend_types);

TYPED_TEST(mul_test, f32_tensors) {
  check_binary<TypeParam>([](const auto& a, const auto& b) { return a * b; },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a * b; }, exact_tol);
}

TYPED_TEST(mul_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return x * 0.3f; },
                         [](const ArrayXd& x) -> ArrayXd { return x * double(0.3f); }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return -7.0f * x; },
                         [](const ArrayXd& x) -> ArrayXd { return -7.0 * x; }, exact_tol);
}

TYPED_TEST(mul_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return a * b; },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return a * b; });
    check_int_unary<TypeParam, T>([](const auto& x) { return x * 3; },
                                  [](const ArrayXl& x) -> ArrayXl { return x * 3; });
  });
}

TYPED_TEST(mul_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return a * b; };
  auto o = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a * b; };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
