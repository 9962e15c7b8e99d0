// tests/ops/elementwise/div_test.cpp — a / b against Eigen. Floats follow IEEE (x/0 = ±inf,
// 0/0 = NaN); integers truncate toward zero, x/0 = 0 and INT_MIN/-1 wraps (div.hpp).
#include "check.hpp"

using namespace kiln_test;

template <class B>
class div_test : public kiln_test::backend_test<B> {};
TYPED_TEST_SUITE(div_test, backend_types);

TYPED_TEST(div_test, f32_tensors) {
  check_binary<TypeParam>([](const auto& a, const auto& b) { return a / b; },
                          [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a / b; }, exact_tol);
}

TYPED_TEST(div_test, f32_scalar_on_either_side) {
  check_unary<TypeParam>([](const auto& x) { return x / 3.0f; },
                         [](const ArrayXd& x) -> ArrayXd { return x / 3.0; }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return 1.0f / x; },
                         [](const ArrayXd& x) -> ArrayXd { return 1.0 / x; }, exact_tol);
  check_unary<TypeParam>([](const auto& x) { return x / 0.0f; },
                         [](const ArrayXd& x) -> ArrayXd { return x / 0.0; }, exact_tol);
}

namespace {

/// The integer rule of div.hpp in int64: truncating division, and 0 where b is 0.
ArrayXl int_div(const ArrayXl& a, const ArrayXl& b) {
  const ArrayXl safe_b = (b == 0).select(std::int64_t(1), b);
  return (b == 0).select(std::int64_t(0), a / safe_b);
}

}  // namespace

TYPED_TEST(div_test, integers_truncate_and_divide_by_zero_gives_zero) {
  for_each_int_dtype([](auto tag) {
    using T = typename decltype(tag)::type;
    // small divisors give non-trivial quotients; 0, -1 and the extremes are among them
    check_int_binary<TypeParam, T>([](const auto& a, const auto& b) { return a / b; }, int_div, {}, {-20, 20});
    check_int_unary<TypeParam, T>([](const auto& x) { return x / 7; },
                                  [](const ArrayXl& x) -> ArrayXl { return int_div(x, ArrayXl::Constant(x.size(), 7)); });
    check_int_unary<TypeParam, T>([](const auto& x) { return x / 0; },
                                  [](const ArrayXl& x) -> ArrayXl { return int_div(x, ArrayXl::Zero(x.size())); });
    check_int_unary<TypeParam, T>([](const auto& x) { return 100 / x; },
                                  [](const ArrayXl& x) -> ArrayXl { return int_div(ArrayXl::Constant(x.size(), 100), x); });
  });
}

TYPED_TEST(div_test, half_and_bfloat16_operands) {
  auto f = [](const auto& a, const auto& b) { return a / b; };
  auto o = [](const ArrayXd& a, const ArrayXd& b) -> ArrayXd { return a / b; };
  check_binary_lowp<TypeParam, kiln::half>(f, o, f16_tol, {}, {0.5f, 4.0f});
  check_binary_lowp<TypeParam, kiln::bfloat16>(f, o, bf16_tol, {}, {0.5f, 4.0f});
}
