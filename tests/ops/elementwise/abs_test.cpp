// tests/ops/elementwise/abs_test.cpp — |x| against Eigen: floats (|-0| = 0, |±inf| = inf,
// NaN stays NaN) and integers (INT_MIN stays INT_MIN: the wrap of -INT_MIN).
#include "check.hpp"

using namespace kiln_test;

template <class B>
class abs_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(abs_test, backend_types);

TYPED_TEST(abs_test, f32) {
  check_unary<TypeParam>([](const auto& x) { return kiln::abs(x); },
                         [](const ArrayXd& x) -> ArrayXd { return x.abs(); }, exact_tol);
}

TYPED_TEST(abs_test, integers_wrap) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    check_int_unary<TypeParam, T>([](const auto& x) { return kiln::abs(x); },
                                  [](const ArrayXl& x) -> ArrayXl { return x.abs(); });
  });
}

TYPED_TEST(abs_test, half_and_bfloat16_operands) {
  auto f = [](const auto& x) { return kiln::abs(x); };
  auto o = [](const ArrayXd& x) -> ArrayXd { return x.abs(); };
  check_unary_lowp<TypeParam, kiln::half>(f, o, f16_tol);
  check_unary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol);
}
