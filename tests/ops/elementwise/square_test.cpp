// tests/ops/elementwise/square_test.cpp — x * x against Eigen: floats and integers (wrapping).
#include "check.hpp"

using namespace kiln_test;

template <class B>
class square_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(square_test, backend_types);

TYPED_TEST(square_test, f32) {
  check_unary<TypeParam>([](const auto& x) { return kiln::square(x); },
                         [](const ArrayXd& x) -> ArrayXd { return x.square(); }, exact_tol);
}

TYPED_TEST(square_test, f32_overflow_to_inf) {
  check_unary<TypeParam>([](const auto& x) { return kiln::square(x); },
                         [](const ArrayXd& x) -> ArrayXd { return x.square().cast<float>().cast<double>(); },
                         exact_tol, {-3e19f, 3e19f});
}

TYPED_TEST(square_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::square(x); },
                                  [](const ArrayXl& x) -> ArrayXl { return x.square(); });
  });
}

TYPED_TEST(square_test, half_and_bfloat16_operands) {
  auto f = [](const auto& x) { return kiln::square(x); };
  auto o = [](const ArrayXd& x) -> ArrayXd { return x.square(); };
  check_unary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
