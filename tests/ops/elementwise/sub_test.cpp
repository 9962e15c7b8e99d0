// tests/ops/elementwise/sub_test.cpp — a - b against Eigen: floats, integers (wrapping),
// scalars on either side, half/bfloat16 operands.
#include "check.hpp"

using namespace kiln_test;

template <class B>
class sub_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(sub_test, backend_types);

TYPED_TEST(sub_test, f32_tensors) {
  check_binary<TypeParam>([](const auto& a, const auto& b) { return a - b; },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a - b; }, exact_tol);
}

TYPED_TEST(sub_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return x - 0.5f; },
                         [](const ArrayXd& x) -> ArrayXd { return x - 0.5; }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return 3.0f - x; },
                         [](const ArrayXd& x) -> ArrayXd { return 3.0 - x; }, exact_tol);
}

TYPED_TEST(sub_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return a - b; },
                                   [](const ArrayXl& a, const ArrayXl& b) -> ArrayXl { return a - b; });
    // the minimum is among the inputs: int8 -128 - 1 = 127, u8 0 - 1 = 255
    check_int_unary<TypeParam, T>([](const auto& x) { return x - 1; },
                                  [](const ArrayXl& x) -> ArrayXl { return x - 1; });
  });
}

TYPED_TEST(sub_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return a - b; };
  auto o = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a - b; };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
